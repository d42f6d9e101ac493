"""The build's switches, the environment variables that override them, and whether retf's ops run here."""

import os

# Why this process runs without the retf op library although RETF_OPS allows it (None: it does not).
OPS_LEFT_OUT = None


def ops_enabled():
    """Whether this process registers the retf op library (RETF_OPS=0 keeps it out, and so does a libstdc++
    older than it needs, loaded before tensorflow)."""
    return os.environ.get("RETF_OPS", "1") != "0" and OPS_LEFT_OUT is None


def switch(config, key):
    """The value of switch ``key`` in this process: its environment variable if set, else the build's choice.

    ``config["features"]`` holds each switch the injected call reads, as the build declares it (value,
    default, variable, values, whether it runs retf kernels, what it does). Where a value other than the
    default runs retf kernels, with RETF_OPS=0 the build's choice falls back to the default (TensorFlow's
    own ops), so no process emits retf ops that it, or a parameter server started the same way, could not run.
    """
    row = config["features"][key]
    chosen = os.environ.get(row["env"], "") if row["env"] else ""
    if chosen and chosen not in row["choices"]:
        allowed = " or ".join(row["choices"]) if len(row["choices"]) == 2 else "one of " + ", ".join(row["choices"])
        raise ImportError("%s=%s is not %s (%s); unset it to use the build's choice, %s"
                          % (row["env"], chosen, allowed, row["what"], row["value"]))
    value = chosen or row["value"]
    if value != row["default"] and row["needs_ops"] == "1" and not ops_enabled():
        if chosen and OPS_LEFT_OUT is None:
            raise ImportError("%s=%s needs the retf op library, which RETF_OPS=0 leaves unregistered; "
                              "unset one of them" % (row["env"], value))
        return row["default"]
    return value
