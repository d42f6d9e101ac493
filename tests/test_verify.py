from retfwheel.proof.verify import _unchanged


def snapshot(**dists):
    return {name: {"version": version, "files": files} for name, (version, files) in dists.items()}


BEFORE = snapshot(
    tensorflow=("1.15.5", {"bin/tensorboard": "a", "lib/tensorflow/x.py": "b"}),
    tensorboard=("1.15.0", {"bin/tensorboard": "a", "lib/tensorboard/main.py": "c"}),
    numpy=("1.18.5", {"lib/numpy/__init__.py": "d"}),
)


def test_identical_environment_passes():
    after = {k: v for k, v in BEFORE.items() if k != "tensorflow"}
    check = _unchanged(BEFORE, after, "tensorflow")
    assert check.status == "pass" and "went with" not in check.detail


def test_file_co_owned_by_the_replaced_distribution_is_noted_not_failed():
    after = snapshot(tensorboard=("1.15.0", {"bin/tensorboard": None, "lib/tensorboard/main.py": "c"}),
                     numpy=("1.18.5", {"lib/numpy/__init__.py": "d"}))
    check = _unchanged(BEFORE, after, "tensorflow")
    assert check.status == "pass" and "bin/tensorboard went with the replaced tensorflow" in check.detail


def test_changed_version_or_file_fails():
    after = snapshot(tensorboard=("1.15.0", {"bin/tensorboard": "a", "lib/tensorboard/main.py": "c"}),
                     numpy=("1.19.5", {"lib/numpy/__init__.py": "e"}))
    assert _unchanged(BEFORE, after, "tensorflow").status == "FAIL"
    after = snapshot(tensorboard=("1.15.0", {"bin/tensorboard": "a", "lib/tensorboard/main.py": "changed"}),
                     numpy=("1.18.5", {"lib/numpy/__init__.py": "d"}))
    check = _unchanged(BEFORE, after, "tensorflow")
    assert check.status == "FAIL" and "lib/tensorboard/main.py" in check.detail


def test_empty_listing_fails():
    assert _unchanged({}, {}, "tensorflow").status == "FAIL"
