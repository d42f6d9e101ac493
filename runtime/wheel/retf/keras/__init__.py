"""Keras (OptimizerV2) counterparts of retf.train."""

from retf.keras import optimizers

__all__ = ["optimizers"]
