"""PEP 440 versions and ranges, judged as pip (packaging) judges an installed version; no third-party code."""

import re

# The patterns are compiled on first use (re caches them): compiling the version pattern took several milliseconds
# of every process's start, where installed versions and ranges are nearly always plain releases (1.18.5).
_VERSION = (
    r"^\s*v?(?:(?P<epoch>[0-9]+)!)?(?P<release>[0-9]+(?:\.[0-9]+)*)"
    r"(?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?"
    r"(?:-(?P<post_n1>[0-9]+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?)?"
    r"(?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?"
    r"(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$")
_DIGITS = frozenset("0123456789")
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


class Version(object):
    """A PEP 440 version, compared as `packaging.version.Version` compares (no third-party code here)."""

    def __init__(self, text):
        match = _Plain(text) or re.match(_VERSION, text, re.IGNORECASE)
        if not match:
            raise ValueError("not a PEP 440 version: %r" % text)
        self.text = text.strip()
        self.epoch = int(match.group("epoch") or 0)
        self.release = tuple(int(p) for p in match.group("release").split("."))
        pre_l = match.group("pre_l")
        self.pre = (_PRE_RANK[pre_l.lower()], int(match.group("pre_n") or 0)) if pre_l else None
        post = match.group("post_n1") or match.group("post_n2")
        self.post = int(post or 0) if (match.group("post_n1") or match.group("post_l")) else None
        self.dev = int(match.group("dev_n") or 0) if match.group("dev_l") else None
        local = match.group("local")
        self.local = tuple((int(p), "") if p.isdigit() else (-1, p.lower()) for p in re.split(r"[-_.]", local)) if local else None
        release = self.release
        while len(release) > 1 and release[-1] == 0:
            release = release[:-1]
        pre = self.pre if self.pre is not None else ((-1, 0) if self.post is None and self.dev is not None else (3, 0))
        self.public_key = (self.epoch, release, pre, -1 if self.post is None else self.post,
                           float("inf") if self.dev is None else self.dev)
        self.key = self.public_key + (((-2, ""),) if self.local is None else self.local,)

    @property
    def is_prerelease(self):
        return self.pre is not None or self.dev is not None


class _Plain(object):
    """A release of digits and dots (1.18.5), as the version pattern's match would give it, read without the pattern;
    false for anything else."""

    def __init__(self, text):
        self.release = text.strip()
        self.plain = all(part and _DIGITS.issuperset(part) for part in self.release.split("."))

    def __bool__(self):
        return self.plain

    def group(self, name):
        return self.release if name == "release" else None


_CLAUSE = r"^\s*(~=|===|==|!=|<=|>=|<|>)\s*([^\s]+)\s*$"


def satisfies(version, specifier):
    """Whether the installed ``version`` lies in the comma-separated PEP 440 ``specifier``, as
    packaging decides for an installed version (pre-releases included); False when it is not PEP 440."""
    try:
        have = Version(version)
    except ValueError:
        return False
    for clause in specifier.split(","):
        if not clause.strip():
            continue
        match = re.match(_CLAUSE, clause)
        if not match or not _holds(have, *match.groups()):
            return False
    return True


def _holds(have, operator, text):
    if operator == "===":
        return text.lower() == have.text.lower()
    if operator in ("==", "!=") and text.endswith(".*"):
        want = Version(text[:-2])
        prefix = have.release[:len(want.release)] + (0,) * max(0, len(want.release) - len(have.release))
        equal = have.epoch == want.epoch and prefix == want.release
        return equal if operator == "==" else not equal
    want = Version(text)
    mine = have.key if want.local is not None else have.public_key
    theirs = want.key if want.local is not None else want.public_key
    if operator == "==":
        return mine == theirs
    if operator == "!=":
        return mine != theirs
    if operator == ">=":
        return have.public_key >= want.public_key
    if operator == "<=":
        return have.public_key <= want.public_key
    if operator == "~=":
        prefix = ".".join(str(p) for p in want.release[:-1]) + ".*"
        return _holds(have, ">=", text) and _holds(have, "==", prefix)
    if operator == "<":  # not a pre-release of the bound itself, unless the bound is one
        if not have.key < want.key:
            return False
        return want.is_prerelease or not have.is_prerelease or _base(have) != _base(want)
    if operator == ">":  # not a post-release or local version of the bound itself, unless the bound is one
        if not have.key > want.key:
            return False
        if want.post is None and have.post is not None and have.public_key[:3] == want.public_key[:3]:
            return False
        return have.local is None or have.public_key != want.public_key
    return False


def _base(version):
    return version.public_key[:2]
