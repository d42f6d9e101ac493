"""Proving a built wheel in its target environment: verify and local clusters."""
