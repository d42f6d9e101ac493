"""What a finished subprocess said, in one line fit for an error message."""

from __future__ import annotations

import json
import subprocess

# pip on machines with extra local indexes repeats this warning for every package it looks up.
_NOISE = ("WARNING: Location",)


def last_json(stdout: str) -> dict | None:
    """The last line of ``stdout`` that is a JSON object (how probes report), or None."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def last_line(result: subprocess.CompletedProcess) -> str:
    """The line that explains a result: the last ERROR line (pip's way), else the last line."""
    lines = [line for line in f"{result.stdout or ''}\n{result.stderr or ''}".splitlines()
             if line.strip() and not line.startswith(_NOISE)]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1].strip()[:300]
