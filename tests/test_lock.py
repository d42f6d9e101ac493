"""target.lock in-process: the lock file round-trips, and a lock made for other requirements is refused."""

import pytest

from factory import make_wheel, tensorflow_files
from retfwheel.errors import RecipeError
from retfwheel.targets.lock import (
    Lock,
    LockedPackage,
    check_lock,
    format_lock,
    read_lock,
    requirements_digest,
    vendored_requirements,
)
from retfwheel.wheelfile.wheel import read_wheel


def test_round_trip_and_drift(libs, tmp_path):
    wheel = read_wheel(make_wheel(tmp_path, tensorflow_files(libs.framework_old_abi)))
    requirements = vendored_requirements(wheel, ("six",))
    assert [r.name for r in requirements] == ["numpy"]  # six is left to the environment
    lock = Lock(tmp_path / "r.lock", "r", "tensorflow-cpu==2.6.2", requirements_digest(requirements),
                (LockedPackage("numpy", "1.19.5", "numpy-1.19.5-cp36-cp36m-manylinux2010_x86_64.whl", "a" * 64, "wheel"),))
    lock.path.write_text(format_lock(lock))
    again = read_lock(lock.path)
    assert again == lock
    check_lock(again, wheel, requirements)
    with pytest.raises(RecipeError, match="requirements differ"):
        check_lock(again, wheel, vendored_requirements(wheel, ()))  # six is not left any more: another closure


def test_a_hand_edited_lock_is_refused(tmp_path):
    path = tmp_path / "r.lock"
    path.write_text('[lock]\nversion = 1\nrecipe = "r"\ninput = "x"\nrequirements_sha256 = "zz"\n\n[[package]]\nname = "numpy"\n')
    with pytest.raises(RecipeError):
        read_lock(path)
