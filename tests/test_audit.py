"""build.audit in-process: the written wheel is re-read and held to its plan; any drift is an AuditError."""

import dataclasses
from pathlib import Path

import pytest

from retfwheel.errors import AuditError
from retfwheel.native.inspection import inspect_wheel
from retfwheel.stages.audit import audit_wheel
from retfwheel.stages.finish import finish
from retfwheel.stages.materialize import StepResults
from retfwheel.stages.pipeline import output_elves
from retfwheel.stages.plan import make_plan
from retfwheel.targets.recipe import load_recipe
from retfwheel.wheelfile.writer import DEFAULT_EPOCH, NewMember, write_wheel


@pytest.fixture
def written(tf_wheel, recipe, tmp_path):
    target = load_recipe(recipe)
    source = tf_wheel()
    inspection = inspect_wheel(source, target)
    plan = make_plan(inspection, target, "0" * 64, "0.1.0")
    plan = finish(plan, target, StepResults(), output_elves(plan, inspection.elves), source)  # adds the SBOM
    wheel = write_wheel(plan, tmp_path / plan.filename, DEFAULT_EPOCH)
    return wheel, plan, target, output_elves(plan, inspection.elves)


def test_a_faithful_wheel_passes_every_check(written):
    wheel, plan, recipe, elves = written
    report = audit_wheel(wheel, plan, recipe, elves)
    assert any("RECORD lists exactly" in c for c in report.checks)
    assert any("fit the wheel's platform tag" in c for c in report.checks)


def test_a_member_that_differs_from_the_plan_fails(written):
    wheel, plan, recipe, elves = written
    changed = tuple(NewMember(m.name, m.data + b"# changed\n") if m.name.endswith("/METADATA") else m for m in plan.members)
    with pytest.raises(AuditError, match="METADATA differs from what was planned"):
        audit_wheel(wheel, dataclasses.replace(plan, members=changed), recipe, elves)


def test_a_missing_member_fails(written):
    wheel, plan, recipe, elves = written
    extra = plan.members + (NewMember("tensorflow/planned_but_not_written.py", b""),)
    with pytest.raises(AuditError, match="members differ from the plan"):
        audit_wheel(wheel, dataclasses.replace(plan, members=extra), recipe, elves)


def test_a_file_name_other_than_the_plans_fails(written):
    wheel, plan, recipe, elves = written
    with pytest.raises(AuditError, match="file name .* != planned"):
        audit_wheel(wheel, dataclasses.replace(plan, filename=plan.filename.replace("manylinux", "nomanylinux")), recipe, elves)


def test_an_sbom_that_does_not_match_the_wheel_fails(written, tmp_path):
    import json

    from retfwheel.stages.sbom import SBOM_NAME

    _, plan, recipe, elves = written
    name = f"{plan.dist_info}/{SBOM_NAME}"
    sbom = json.loads(next(m.data for m in plan.members if m.name == name))
    assert [c["name"] for c in sbom["components"]] == ["tensorflow-cpu"] and sbom["specVersion"] == "1.5"
    sbom["components"].append({"type": "library", "bom-ref": "vendored:numpy", "name": "numpy", "version": "1.19.5",
                               "hashes": [{"alg": "SHA-256", "content": "0" * 64}],
                               "properties": [{"name": "retfwheel:role", "value": "vendored"}]})
    members = tuple(NewMember(name, json.dumps(sbom).encode()) if m.name == name else m for m in plan.members)
    changed = dataclasses.replace(plan, members=members)
    (tmp_path / "other").mkdir()
    wheel = write_wheel(changed, tmp_path / "other" / plan.filename, DEFAULT_EPOCH)
    with pytest.raises(AuditError, match="the SBOM does not match the wheel: vendored distributions differ"):
        audit_wheel(wheel, changed, recipe, elves)


@pytest.mark.parametrize("change, message", [
    (lambda text: text.replace("_retf_resume = _retf_bootstrap()", "import os\n_retf_resume = _retf_bootstrap()"),
     "the bootstrap does not run before the package's first import"),
    (lambda text: text + "import os\n", "runs code outside the `try` that ends what the bootstrap began"),
    (lambda text: text + "VALUE = 1\n", "runs code outside the `try`"),
    (lambda text: text.replace("        _retf_resume()", "        pass"), "runs code outside the `try`"),
])
def test_a_package_init_whose_code_escapes_the_bootstrap_fails(written, tmp_path, change, message):
    from retfwheel.stages.plan import BOOTSTRAP_FILE, BOOTSTRAP_MODULE
    from retfwheel.wheelfile.injection import bootstrap_block, inject

    _, plan, recipe, elves = written
    shipped = (Path(__file__).resolve().parent.parent / "runtime" / "wheel" / BOOTSTRAP_FILE).read_bytes()
    patched = inject(b'"""TF."""\nimport sys as _sys\n', bootstrap_block(BOOTSTRAP_MODULE, {}), "tensorflow/__init__.py")

    def audited(init: bytes, folder: str):
        members = tuple(m for m in plan.members if m.name != "tensorflow/__init__.py") + (
            NewMember("tensorflow/__init__.py", init), NewMember(BOOTSTRAP_FILE, shipped))
        members = tuple(sorted(members, key=lambda m: (m.name.startswith(plan.dist_info), m.name)))
        changed = dataclasses.replace(plan, members=members)
        (tmp_path / folder).mkdir()
        return audit_wheel(write_wheel(changed, tmp_path / folder / plan.filename, DEFAULT_EPOCH), changed, recipe, elves)

    assert "runs the rest in its `try`" in " ".join(audited(patched, "as built").checks)
    with pytest.raises(AuditError, match=message):
        audited(change(patched.decode()).encode(), "changed")
