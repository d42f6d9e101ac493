"""Scripts run inside target environments (Python 3.6+) by `verify`, the tests and the benchmarks.

Data for the tool, read with importlib.resources and never imported by it."""
