"""Native code analysis: ELF files, manylinux policies, verdicts against a target, the cached scan of a wheel, inspect."""
