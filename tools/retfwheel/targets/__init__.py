"""Targets and their environments: recipes, locks, interpreters, downloads, the emulated old environment."""
