"""The retf op library's sources: C++ kernels (cc/) and the `retf` Python package that ships in
produced wheels. retfwheel reads these files as data and never imports them."""
