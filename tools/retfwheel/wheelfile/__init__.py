"""Wheel files: reading and verifying an archive, RECORD, METADATA/WHEEL headers, and the deterministic writer."""
