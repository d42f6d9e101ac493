from retfwheel.manylinux import installable_platforms, load_policies
from retfwheel.native.elf import ElfInfo
from retfwheel.native.policy import lowest_policy


def elf(versions, needed=("libc.so.6",)):
    return ElfInfo("x.so", 64, "EM_X86_64", None, tuple(needed), (), (), {"libc.so.6": tuple(versions)})


def test_policies_come_from_auditwheel_data_oldest_first():
    policies = load_policies("x86_64")
    assert policies[0].name == "manylinux_2_5" and "manylinux2010" in policies[1].aliases
    assert all(a.glibc <= b.glibc for a, b in zip(policies, policies[1:]))


def test_lowest_policy_follows_the_newest_symbol_version():
    assert lowest_policy((elf(["GLIBC_2.2.5", "GLIBC_2.12"]),), frozenset(), "x86_64").name == "manylinux_2_12"
    assert lowest_policy((elf(["GLIBC_2.28"]),), frozenset(), "x86_64").name == "manylinux_2_28"


def test_unlisted_system_library_means_plain_linux_but_bundled_is_fine():
    odd = elf(["GLIBC_2.2.5"], needed=("libc.so.6", "libodd.so.1"))
    assert lowest_policy((odd,), frozenset(), "x86_64") is None
    assert lowest_policy((odd,), frozenset({"libodd.so.1"}), "x86_64").name == "manylinux_2_5"


def test_installable_platforms_stop_at_the_target_glibc():
    tags = installable_platforms((2, 27), "x86_64")
    assert "manylinux2010_x86_64" in tags and "manylinux_2_27_x86_64" in tags and tags[-1] == "linux_x86_64"
    assert "manylinux_2_28_x86_64" not in tags
