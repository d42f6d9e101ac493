"""What a finished subprocess said, in one line fit for an error message."""

from __future__ import annotations

import subprocess

# pip on machines with extra local indexes repeats this warning for every package it looks up.
_NOISE = ("WARNING: Location",)


def last_line(result: subprocess.CompletedProcess) -> str:
    """The line that explains a result: the last ERROR line (pip's way), else the last line."""
    lines = [line for line in f"{result.stdout or ''}\n{result.stderr or ''}".splitlines()
             if line.strip() and not line.startswith(_NOISE)]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1].strip()[:300]
