"""The sharing table (pure) and the bootstrap's PEP 440 comparisons, which must agree with packaging."""

import importlib.util
import itertools
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from retfwheel.stages.sharing import Dependency, importable_names, sharing_table
from retfwheel.targets.recipe import load_recipe

REPO = Path(__file__).resolve().parent.parent
TARGET = load_recipe(REPO / "recipes" / "emulated-py36.toml").target


def dep(name, version, requires=(), modules=None):
    return Dependency(name, version, tuple(requires), tuple(modules or [name.replace("-", "_")]))


def by_name(shares):
    return {s.name: s for s in shares}


def test_the_input_pin_is_corrected_and_every_requirer_narrows_the_range():
    shares = by_name(sharing_table(
        "tensorflow-cpu", ("numpy (~=1.19.2)", "six (~=1.15.0)", "gast (==0.4.0)", "tensorboard (~=2.6)"),
        [dep("numpy", "1.19.5"), dep("six", "1.15.0"), dep("gast", "0.4.0"),
         dep("tensorboard", "2.6.0", ["numpy>=1.12.0", "six>=1.10.0", "setuptools>=41.0.0",
                                      "dataclasses; python_version < '3.7'", "requests[socks]; extra == 'remote'"]),
         dep("setuptools", "59.6.0", modules=["setuptools", "pkg_resources"]), dep("dataclasses", "0.8"),
         dep("requests", "2.27.1")], TARGET))
    assert shares["numpy"].range == "<1.20,>=1.16"  # tensorboard's >=1.12.0 is implied, so not written
    assert shares["numpy"].correction.pinned == "~=1.19.2" and "0xd" in shares["numpy"].correction.reason
    assert shares["six"].range == ">=1.12.0"
    assert shares["gast"].range == "==0.4.0" and shares["gast"].correction is None  # never widened
    assert shares["numpy"].requested_by == ("tensorboard", "tensorflow-cpu")
    # markers are judged for the target (Python 3.6), extras are not asked for
    assert shares["dataclasses"].requested_by == ("tensorboard",) and shares["requests"].requested_by == ()
    assert shares["setuptools"].not_served and not shares["numpy"].not_served
    # TF 2.6.0's tensorboard~=2.6 admits 2.7+; taken as TF 2.6.1's <2.7,>=2.6.0
    assert shares["tensorboard"].config() == {"name": "tensorboard", "version": "2.6.0", "range": "<2.7,>=2.6.0",
                                              "modules": ["tensorboard"],
                                              "metadata": "tensorboard-2.6.0.dist-info.vendored"}


def test_a_pin_other_than_the_one_a_correction_names_is_kept():
    shares = by_name(sharing_table("tensorflow", ("numpy (~=1.23.5)",), [dep("numpy", "1.23.5")], TARGET))
    assert shares["numpy"].range == "~=1.23.5" and shares["numpy"].correction is None


def test_importable_names_of_a_distribution():
    modules, namespaces = importable_names([("six.py", "1"), ("google/protobuf/__init__.py", "3"),
                                            ("h5py/__init__.py", "2"), ("_cffi.cpython-36m-x86_64-linux-gnu.so", "1"),
                                            ("h5py-2.10.0.dist-info/METADATA", "2")])
    assert set(modules) == {"six", "google.protobuf", "h5py", "_cffi"} and namespaces == ["google"]


@pytest.fixture(scope="module")
def bootstrap():
    spec = importlib.util.spec_from_file_location("versions", REPO / "runtime" / "wheel" / "tensorflow" / "_retf" / "versions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


VERSIONS = ["1.0", "1.0.0", "1.0a1", "1.0b2", "1.0rc1", "1.0.dev1", "1.0a1.dev2", "1.0.post1", "1.0.post1.dev1",
            "1.0+local.1", "1.0.1", "1.1", "0.9", "1!0.5", "2025.04.26", "2025.4.26", "1.19.5", "1.18.5", "1.20.0",
            "1.0-1", "1.0.0-r2", "0.4.0", "0.2.2", "2.6.0rc0", "1.12.1", "1.16.0", " 1.18.5 ", "v1.18.5", "V1.0RC1"]
SPECIFIERS = [">=1.0", ">1.0", "<1.0", "<=1.0", "==1.0", "!=1.0", "~=1.0", "==1.0.*", "!=1.0.*", ">=1.0a1", "<1.1",
              ">1.0.post1", "==1.0+local.1", ">=1.16,<1.20", "~=1.19.2", "~=1.15.0", "==0.4.0", "<2.7,>=2.6.0",
              "==2025.4.26", ">1.0a1", "<1.0rc1", "~=0.10", ">=1.11.0,<1.15", "===1.0", ""]


def test_the_bootstrap_compares_versions_as_packaging_does(bootstrap):
    wrong = [(v, s) for v, s in itertools.product(VERSIONS, SPECIFIERS)
             if bootstrap.satisfies(v, s) != SpecifierSet(s).contains(v, installed=True)]
    assert not wrong
    order = [(a, b) for a, b in itertools.product(VERSIONS, VERSIONS)
             if (Version(a) < Version(b)) != (bootstrap.Version(a).key < bootstrap.Version(b).key)]
    assert not order
    assert bootstrap.satisfies("2025.04.26", "==2025.4.26") and not bootstrap.satisfies("not a version", ">=0")
    assert not any(bootstrap.satisfies(v, ">=0") for v in ("1..2", "1.2.", ".1", "1.\u0662"))  # not PEP 440
