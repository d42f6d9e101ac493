"""The docker/ images, checked statically (no Docker engine here); the entry point itself runs in the
slow end-to-end test against the emulated environment."""

import re
import stat
from pathlib import Path

import pytest

DOCKER = Path(__file__).resolve().parent.parent / "docker"
IMAGES = sorted(p.parent for p in DOCKER.glob("*/Dockerfile"))


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    return [(line.split()[0].upper(), line.split(None, 1)[1]) for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_both_images_exist():
    assert {p.name for p in IMAGES} >= {"ubuntu18.04-py36", "builder"}


@pytest.mark.parametrize("image", IMAGES, ids=lambda p: p.name)
def test_base_is_pinned(image):
    bases = [arg for op, arg in instructions(image / "Dockerfile") if op == "FROM"]
    assert bases, "no FROM"
    for base in bases:
        assert "@sha256:" in base or re.search(r":[a-z0-9.-]*\d{8}", base), f"unpinned base image {base}"


@pytest.mark.parametrize("image", IMAGES, ids=lambda p: p.name)
def test_apt_is_non_interactive_and_minimal(image):
    steps = instructions(image / "Dockerfile")
    env = " ".join(arg for op, arg in steps if op == "ENV")
    assert "DEBIAN_FRONTEND=noninteractive" in env
    for op, arg in steps:
        if op == "RUN" and "apt-get install" in arg:
            assert " -y " in arg and "--no-install-recommends" in arg and "apt-get update" in arg


@pytest.mark.parametrize("image", IMAGES, ids=lambda p: p.name)
def test_entry_point_is_present(image):
    steps = instructions(image / "Dockerfile")
    entry = [arg for op, arg in steps if op == "ENTRYPOINT"]
    assert len(entry) == 1
    for op, arg in steps:
        if op == "COPY":
            sources = arg.split()[:-1]
            for source in sources:
                assert (DOCKER.parent / source).exists(), f"COPY source {source} is missing"


def test_verify_entry_script_is_executable_and_calls_verify():
    script = DOCKER / "ubuntu18.04-py36" / "entrypoint.sh"
    assert script.stat().st_mode & stat.S_IXUSR
    text = script.read_text()
    assert text.startswith("#!/bin/sh") and '"$tool" verify "$@" --recipe "$recipe"' in text


@pytest.mark.parametrize("image", IMAGES, ids=lambda p: p.name)
def test_an_image_that_installs_the_tool_copies_every_folder_it_is_built_from(image):
    import tomllib

    steps = instructions(image / "Dockerfile")
    if not any(op == "RUN" and "pip install --no-cache-dir /opt/retfwheel" in arg for op, arg in steps):
        pytest.skip("does not install the tool")
    copied = {source for op, arg in steps if op == "COPY" for source in arg.split()[:-1]}
    table = tomllib.loads((DOCKER.parent / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {folder.split("/")[0] for folder in table["package-dir"].values()}
    assert folders - copied == set()
