"""Import tensorflow, then each module named on the command line; report where each came from and
which distributions the wheel serves privately (JSON on stdout). Python 3.6+."""
import importlib
import json
import os
import sys

import tensorflow  # noqa: F401

finder = next((f for f in sys.meta_path if type(f).__name__ == "PrivateFinder"), None)
folder = finder.folder if finder is not None else None
private = {}
if finder is not None:
    for name, route in finder.routes.items():
        private[name] = {"version": route.version, "range": route.range,
                         "environment": route.theirs[0] if route.theirs else None}
modules = {}
for name in sys.argv[1:]:
    try:
        module = importlib.import_module(name)
    except Exception as error:  # a module that cannot be imported is reported, not fatal
        modules[name] = {"error": "%s: %s" % (type(error).__name__, str(error).splitlines()[0] if str(error) else "")}
        continue
    origin = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", []) or []), None)
    real = os.path.realpath(origin) if origin else ""
    modules[name] = {"file": origin, "private": bool(folder and real.startswith(folder + os.sep))}
print(json.dumps({"private_folder": folder, "private": private, "modules": modules}))
