"""Libraries built for TensorFlow 1.x: loading one says what it is and what to do."""

import os
import sys

from . import HINT_MARK

TF1_FRAMEWORK = "libtensorflow_framework.so.1"


class _ExplainingLoads(object):
    """load_library's pywrap module, but a library built for TensorFlow 1.x that fails to load says so."""

    def __init__(self, pywrap, label):
        self._pywrap, self._label = pywrap, label

    def __getattr__(self, name):
        return getattr(self._pywrap, name)

    def TF_LoadLibrary(self, filename):  # noqa: N802 (TensorFlow's name)
        try:
            return self._pywrap.TF_LoadLibrary(filename)
        except Exception as error:  # TensorFlow's NotFoundError: dlopen's message
            message = getattr(error, "message", str(error))
            hint = tf1_library_hint(filename, message, self._label)
            if hint is None or not hasattr(error, "node_def"):
                raise
            raise type(error)(error.node_def, error.op, message + HINT_MARK + hint) from None


def explain(load_library, config):
    """Make load_library (its module) explain a library built for TensorFlow 1.x that fails to load."""
    if not isinstance(load_library.py_tf, _ExplainingLoads):
        load_library.py_tf = _ExplainingLoads(load_library.py_tf, config["label"])


def tf1_library_hint(filename, message, label):
    """What to do about ``filename`` when it failed to load because it was built for TensorFlow 1.x (it links TF
    1.x's framework library), or None when that is not why."""
    path = os.path.realpath(filename)
    if TF1_FRAMEWORK not in message and not _file_mentions(path, TF1_FRAMEWORK.encode()):
        return None
    owner = _owning_distribution(path)
    return ("%s%s was built for TensorFlow 1.x: it links %s, TF 1.x's framework library, and cannot load into %s "
            "(TensorFlow 2.x). Fix: install a release of %s built for this TensorFlow version; for a custom-op "
            "library you have the sources of, rebuild it here with the flags of tf.sysconfig.get_compile_flags() "
            "and tf.sysconfig.get_link_flags(); or keep running it on TF 1.15."
            % (path, " (%s)" % owner if owner else "", TF1_FRAMEWORK, label,
               owner.split(" ")[0] if owner else "it"))


def _file_mentions(path, needle):
    try:
        with open(path, "rb") as stream:
            tail = b""
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                if needle in tail + chunk:
                    return True
                tail = chunk[-len(needle):]
    except OSError:
        pass
    return False


def _owning_distribution(path):
    """"name version" of the installed distribution whose RECORD lists ``path``, or None."""
    import glob
    for folder in sys.path:
        folder = os.path.realpath(folder or ".")
        if not path.startswith(folder + os.sep):
            continue
        for info in glob.glob(os.path.join(folder, "*.dist-info")):
            try:
                with open(os.path.join(info, "RECORD")) as record:
                    listed = [line.rsplit(",", 2)[0].strip('"') for line in record]
            except OSError:
                continue
            base = os.path.basename(path)
            if any(os.path.realpath(os.path.join(folder, entry)) == path for entry in listed if entry.endswith(base)):
                name, _, version = os.path.basename(info)[:-len(".dist-info")].partition("-")
                return "%s %s" % (name.replace("_", "-"), version)
    return None
