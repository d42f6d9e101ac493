"""What an ELF file needs from the machine: DT_NEEDED, RPATH, and symbol versions.

Only the program headers and the dynamic segment are read. pyelftools' ELFFile reads the section
table, which sits at the very end of the file; hiding it makes ELFFile fall back to segments, so a
400 MB library inside a wheel is decompressed only as far as its dynamic segment.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import IO, cast

from elftools.common.exceptions import ELFError
from elftools.common.utils import struct_parse
from elftools.elf.elffile import ELFFile

from retfwheel.wheelfile.archive import MemberView

ELF_MAGIC = b"\x7fELF"
# Symbol-version families whose newest required version decides where a binary can run.
FAMILIES = ("GLIBC", "GLIBCXX", "CXXABI", "GCC")
_VERSION = re.compile(r"^([A-Z][A-Z0-9]*?)_(\d+(?:\.\d+)*)$")


def parse_symbol_version(text: str) -> tuple[str, tuple[int, ...]] | None:
    """``'GLIBCXX_3.4.29'`` -> ``('GLIBCXX', (3, 4, 29))``; None for ``GLIBC_PRIVATE`` and friends."""
    match = _VERSION.match(text)
    if not match:
        return None
    return match.group(1), tuple(int(p) for p in match.group(2).split("."))


def format_version(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


def parse_version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


@dataclass(frozen=True)
class ElfInfo:
    """The load-time requirements of one ELF file."""

    path: str
    elf_class: int
    machine: str
    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    # library -> symbol versions required from it, e.g. {"libc.so.6": ("GLIBC_2.2.5", ...)}
    version_needs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # symbol versions this file defines (a runtime library's offer), e.g. ("GLIBCXX_3.4", ...)
    provides: tuple[str, ...] = ()
    # How many of its own tensorflow:: dynamic symbols name a std::string of the C++11 ABI and of the
    # old one, (cxx11, old); None when not counted (only the framework library is)
    string_abi_symbols: tuple[int, int] | None = None

    @property
    def cxx11_abi(self) -> bool | None:
        """True: new (C++11) std::string ABI; False: old ABI; None: not counted, or a tie."""
        return None if self.string_abi_symbols is None else majority_abi(*self.string_abi_symbols)

    def newest(self, family: str) -> tuple[int, ...] | None:
        """Newest version of ``family`` (e.g. 'GLIBCXX') this file needs, if any."""
        found = [
            parsed[1]
            for versions in self.version_needs.values()
            for parsed in map(parse_symbol_version, versions)
            if parsed and parsed[0] == family
        ]
        return max(found) if found else None

    def newest_provided(self, family: str) -> tuple[int, ...] | None:
        """Newest version of ``family`` this file defines (e.g. GLIBCXX of a libstdc++)."""
        found = [p[1] for p in map(parse_symbol_version, self.provides) if p and p[0] == family]
        return max(found) if found else None

    def newest_by_family(self) -> dict[str, str]:
        return {f: format_version(v) for f in FAMILIES if (v := self.newest(f)) is not None}


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


def read_elf(path: str, view: MemberView, *, string_abi: bool = False) -> ElfInfo:
    """Analyse the ELF file readable through ``view`` (a MemberView: it is patched in memory as it is read).

    ``string_abi`` also derives the std::string ABI (costly on large symbol tables).
    """
    head = view.read(64)
    if not is_elf(head) or len(head) < 52:
        raise ValueError(f"{path}: not an ELF file")
    elf_class = head[4]
    little = head[5] == 1
    _hide_section_table(view, elf_class, little)
    view.seek(0)
    try:
        elf = ELFFile(_stream(view))
        dynamic = next(iter(elf.iter_segments(type="PT_DYNAMIC")), None)
        machine = elf["e_machine"]
        if dynamic is None:
            return ElfInfo(path, elf_class * 32, machine, None, (), (), ())
        tags: dict[str, list[str]] = {"DT_NEEDED": [], "DT_RPATH": [], "DT_RUNPATH": [], "DT_SONAME": []}
        numbers: dict[str, int] = {}
        for tag in dynamic.iter_tags():  # type: ignore[attr-defined]  # a DynamicSegment, by its type
            name = tag.entry.d_tag
            if name == "DT_NEEDED":
                tags[name].append(tag.needed)
            elif name == "DT_RPATH":
                tags[name].extend(p for p in tag.rpath.split(":") if p)
            elif name == "DT_RUNPATH":
                tags[name].extend(p for p in tag.runpath.split(":") if p)
            elif name == "DT_SONAME":
                tags[name].append(tag.soname)
            elif name in ("DT_STRTAB", "DT_STRSZ", "DT_VERNEED", "DT_VERNEEDNUM", "DT_VERDEF", "DT_VERDEFNUM"):
                numbers[name] = tag.entry.d_val
        strtab = _file_offset(elf, numbers.get("DT_STRTAB"))
        needs = _version_needs(elf, view, strtab, numbers)
        provides = _version_definitions(elf, view, strtab, numbers)
        abi_symbols = _string_abi_symbols(view, strtab, numbers.get("DT_STRSZ", 0)) if string_abi else None
    # pyelftools meets damaged input with assertions and index errors as well as ELFError (found by fuzzing)
    except (ELFError, struct.error, KeyError, StopIteration, AssertionError, IndexError, UnicodeDecodeError,
            OverflowError) as exc:
        raise ValueError(f"{path}: malformed ELF ({type(exc).__name__}: {exc})") from exc
    return ElfInfo(
        path=path,
        elf_class=elf_class * 32,
        machine=machine,
        soname=tags["DT_SONAME"][0] if tags["DT_SONAME"] else None,
        needed=tuple(tags["DT_NEEDED"]),
        rpath=tuple(tags["DT_RPATH"]),
        runpath=tuple(tags["DT_RUNPATH"]),
        version_needs=needs,
        provides=provides,
        string_abi_symbols=abi_symbols,
    )


def _stream(view: MemberView) -> IO[bytes]:
    """The view as the binary stream pyelftools reads (a RawIOBase is one; its stubs ask for IO[bytes])."""
    return cast(IO[bytes], view)


def _hide_section_table(view: MemberView, elf_class: int, little: bool) -> None:
    """Zero e_shoff/e_shnum/e_shstrndx in the buffered header (not in the file)."""
    end = "<" if little else ">"
    if elf_class == 2:
        view.patch(0x28, struct.pack(end + "Q", 0))
        view.patch(0x3C, struct.pack(end + "HH", 0, 0))
    else:
        view.patch(0x20, struct.pack(end + "I", 0))
        view.patch(0x30, struct.pack(end + "HH", 0, 0))


def _file_offset(elf: ELFFile, address: int | None) -> int | None:
    if address is None:
        return None
    return next(iter(elf.address_offsets(address)), None)


def _cstring(view: MemberView, offset: int) -> str:
    view.seek(offset)
    data = b""
    while b"\x00" not in data:
        chunk = view.read(256)
        if not chunk:
            break
        data += chunk
    return data.split(b"\x00", 1)[0].decode("utf-8", "replace")


def _version_needs(elf: ELFFile, view: MemberView, strtab: int | None, numbers: dict[str, int]) -> dict[str, tuple[str, ...]]:
    start = _file_offset(elf, numbers.get("DT_VERNEED"))
    if start is None or strtab is None:
        return {}
    needs: dict[str, tuple[str, ...]] = {}
    offset = start
    for _ in range(numbers.get("DT_VERNEEDNUM", 0)):
        verneed = struct_parse(elf.structs.Elf_Verneed, _stream(view), stream_pos=offset)
        library = _cstring(view, strtab + verneed["vn_file"])
        names = []
        aux = offset + verneed["vn_aux"]
        for _ in range(verneed["vn_cnt"]):
            vernaux = struct_parse(elf.structs.Elf_Vernaux, _stream(view), stream_pos=aux)
            names.append(_cstring(view, strtab + vernaux["vna_name"]))
            aux += vernaux["vna_next"]
        needs[library] = tuple(sorted(names))
        if not verneed["vn_next"]:
            break
        offset += verneed["vn_next"]
    return needs


_ABI_MARKERS = re.compile(rb"St7__cxx11|B5cxx11|RKSs|PKSs")
# A symbol of namespace tensorflow, through the special names around it (guard variables, vtables,
# typeinfo, thunks, local statics). A library may carry statically linked libstdc++ or __gnu_cxx code
# of both ABIs (intel-tensorflow 2.6.0 does), so only TensorFlow's own symbols tell which std::string
# its interface uses.
_TENSORFLOW_SYMBOL = re.compile(rb"_Z(?:G[VR]|GTt|T[VISTHW]|Thn?\d+_|Tvn?\d+_n?\d+_)?Z?N?[rVKRO]*10tensorflow")


def _version_definitions(elf: ELFFile, view: MemberView, strtab: int | None, numbers: dict[str, int]) -> tuple[str, ...]:
    start = _file_offset(elf, numbers.get("DT_VERDEF"))
    if start is None or strtab is None:
        return ()
    names = []
    offset = start
    for _ in range(numbers.get("DT_VERDEFNUM", 0)):
        verdef = struct_parse(elf.structs.Elf_Verdef, _stream(view), stream_pos=offset)
        if verdef["vd_cnt"] and not verdef["vd_flags"] & 0x1:  # VER_FLG_BASE names the file itself
            verdaux = struct_parse(elf.structs.Elf_Verdaux, _stream(view), stream_pos=offset + verdef["vd_aux"])
            names.append(_cstring(view, strtab + verdaux["vda_name"]))
        if not verdef["vd_next"]:
            break
        offset += verdef["vd_next"]
    return tuple(sorted(names))


def majority_abi(cxx11: int, old: int) -> bool | None:
    """The std::string ABI most of the counted symbols use: True for C++11, False for old, None on a tie."""
    return None if cxx11 == old else cxx11 > old


def _string_abi_symbols(view: MemberView, strtab: int | None, size: int) -> tuple[int, int]:
    """(cxx11, old): how many of the library's own tensorflow:: dynamic symbols name each std::string ABI."""
    if strtab is None or not size:
        return 0, 0
    view.seek(strtab)
    names = view.read(size)
    cxx11: set[int] = set()  # the symbols by where their names start
    old: set[int] = set()
    for match in _ABI_MARKERS.finditer(names):
        start = names.rfind(b"\x00", 0, match.start()) + 1
        if _TENSORFLOW_SYMBOL.match(names, start):
            (old if match.group().endswith(b"Ss") else cxx11).add(start)
    return len(cxx11), len(old)
