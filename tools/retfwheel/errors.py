"""One error hierarchy: each family has its own exit code and a hint the CLI shows."""

from __future__ import annotations


class RetfError(Exception):
    """Base of every error the tool reports to a user (never with a traceback)."""

    exit_code = 1
    hint = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    @property
    def lines(self) -> list[str]:
        return [self.args[0]]


class InputFileError(RetfError):
    """An input path is missing or unreadable."""

    exit_code = 3
    hint = "check the path; pass a .whl file produced by pip or bazel"


class WheelFormatError(RetfError):
    """The input is not a well-formed wheel (empty, truncated, not a zip, bad metadata)."""

    exit_code = 4
    hint = "re-download the wheel; `pip download --no-deps` gives a clean copy"


class UnsafeArchiveError(RetfError):
    """The archive holds entries that could escape or confuse an install."""

    exit_code = 5
    hint = "refusing to process it; obtain the wheel from a trusted build"


class RecordError(RetfError):
    """RECORD disagrees with the archive's contents."""

    exit_code = 6
    hint = "the wheel was modified after it was built; re-download or rebuild it"


class RecipeError(RetfError):
    """A recipe is missing, malformed or invalid. Carries every problem found."""

    exit_code = 7
    hint = "fix the recipe; docs/recipes.md describes the format (the 1.x API's switches: docs/guide.md)"

    def __init__(self, problems: list[str], *, hint: str | None = None) -> None:
        super().__init__(problems[0] if len(problems) == 1 else f"{len(problems)} problems", hint=hint)
        self.problems = list(problems)

    @property
    def lines(self) -> list[str]:
        return self.problems


class TargetMismatchError(RetfError):
    """The input wheel does not fit the recipe's target (not TensorFlow, other Python, ...)."""

    exit_code = 8
    hint = "choose a recipe for this wheel, or a wheel for this recipe's target"


class AlreadyProcessedError(RetfError):
    """The input wheel was already produced by retfwheel."""

    exit_code = 9
    hint = "start from the original TensorFlow wheel, not a retfwheel output"


class AuditError(RetfError):
    """The produced wheel failed its audit; nothing was written."""

    exit_code = 10
    hint = "this is what would break on the target; see the reasons above"


class FetchError(RetfError):
    """Downloading an input, package or runtime failed or did not verify."""

    exit_code = 11
    hint = "check the network and the pinned version/hash, then retry"


class OutputError(RetfError):
    """The output could not be written."""

    exit_code = 12
    hint = "check that the output directory is writable and has space"


class EmulationError(RetfError):
    """The old environment cannot be emulated on this machine."""

    exit_code = 13
    hint = "run as root (unshare -m) or allow user namespaces (unshare -Urm), or verify in the docker/ image"


class VerificationFailed(RetfError):
    """`retfwheel verify` ran and at least one check failed."""

    exit_code = 14
    hint = "the table above names each failing check and what it saw"


class OpBuildError(RetfError):
    """The op library could not be compiled."""

    exit_code = 15
    hint = "see the compiler's message; `[ops] build = false` in the recipe leaves the op library out"
