"""Everything of retfwheel that runs outside the tool, read by the tool as data and never imported by it.

wheel/   laid out as the produced wheel: each file ships at its own path (tensorflow/_retf/__init__.py is
         tensorflow/_retf/__init__.py in the wheel), chosen by what the build does (retfwheel.tree)
ops/     the C++ sources of the retf op library, compiled into retf/_retf_ops.so against the input's headers
probes/  scripts `verify`, the tests and the benchmarks run inside target environments (Python 3.6+)
"""
