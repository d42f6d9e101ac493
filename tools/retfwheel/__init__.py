"""retfwheel: rebuild TensorFlow 2.x wheels for old Python 3.6 / old libstdc++ user stacks."""

__version__ = "0.1.0"
