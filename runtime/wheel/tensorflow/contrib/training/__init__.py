"""tf.contrib.training: HParams (written here, TF 1.15's behaviour: typed values, parse("a=1,b=[2,3]"), JSON,
override_from_dict), tf_slim's training functions (create_train_op, train, add_gradients_summaries, ...) and
TensorFlow's checkpoint waiting (wait_for_new_checkpoint, checkpoints_iterator)."""
import json
import numbers
import re

from tensorflow.contrib import part, require_tf_slim
from tensorflow.python.training.checkpoint_utils import checkpoints_iterator, wait_for_new_checkpoint  # noqa: F401

require_tf_slim("training")
from tf_slim.training.training import (  # noqa: E402,F401
    add_gradients_summaries,
    clip_gradient_norms,
    clip_gradient_norms_fn,
    create_train_op,
    multiply_gradients,
    train,
)

# name=value or name[index]=value; a value is a [list], or runs to the next comma.
_ASSIGNMENT = re.compile(r"\s*(?P<name>[A-Za-z_]\w*)\s*(\[\s*(?P<index>\d+)\s*\])?\s*=\s*"
                         r"((?P<list>\[[^\]]*\])|(?P<value>[^,\[]*))\s*(,|$)")


def _bool(text):
    lowered = text.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise ValueError(text)


def _convert(name, kind, text, values):
    """``text`` read as ``kind`` (bool, int, float or str); ``values``: the whole string, for the message."""
    try:
        if kind is bool:
            return _bool(text)
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
    except ValueError:
        raise ValueError("Could not parse hparam '%s' of type '%s' with value '%s' in %s"
                         % (name, kind.__name__, text, values)) from None
    return text


def parse_values(values, type_map, ignore_unknown=False):
    """{name: value} from a string of comma-separated "name=value" assignments (TF 1.15's grammar): a list as
    "name=[v1,v2]", one element as "name[i]=v" (giving {name: {i: v}}), each value read as its type in ``type_map``."""
    results = {}
    position = 0
    values = values.strip()
    while position < len(values):
        found = _ASSIGNMENT.match(values, position)
        if not found:
            raise ValueError("Malformed hyperparameter value: %s" % values[position:])
        position = found.end()
        name = found.group("name")
        if name not in type_map:
            if ignore_unknown:
                continue
            raise ValueError("Unknown hyperparameter type for %s" % name)
        kind = type_map[name]
        if found.group("list") is not None:
            inner = found.group("list")[1:-1].strip()
            if found.group("index") is not None:
                raise ValueError("Assignment of a list to a list index.")
            value = [_convert(name, kind, item.strip(), values) for item in inner.split(",")] if inner else []
            if name in results:
                raise ValueError("Multiple assignments to variable '%s'" % name)
            results[name] = value
        elif found.group("index") is not None:
            current = results.setdefault(name, {})
            if not isinstance(current, dict):
                raise ValueError("Multiple assignments to variable '%s'" % name)
            index = int(found.group("index"))
            if index in current:
                raise ValueError("Multiple assignments to variable '%s[%d]'" % (name, index))
            current[index] = _convert(name, kind, found.group("value").strip(), values)
        else:
            if name in results:
                raise ValueError("Multiple assignments to variable '%s'" % name)
            results[name] = _convert(name, kind, found.group("value").strip(), values)
    return results


def _cast(name, kind, value):
    """``value`` as the hyperparameter's ``kind``, where TF 1.15 allowed it (int into float; no bool/number mixing)."""
    if kind is bool or isinstance(value, bool):
        if kind is bool and isinstance(value, bool):
            return value
        raise ValueError("Could not cast hparam '%s' of type '%s' from value %r" % (name, kind, value))
    if kind is float and isinstance(value, numbers.Real):
        return float(value)
    if kind is int and isinstance(value, numbers.Integral):
        return int(value)
    if kind is str and isinstance(value, str):
        return value
    if isinstance(value, kind):
        return value
    raise ValueError("Could not cast hparam '%s' of type '%s' from value %r" % (name, kind, value))


class HParams(object):
    """Hyperparameters as attributes, each with the type of the value it was added with (a list's: its elements')."""

    _HAS_DYNAMIC_ATTRIBUTES = True  # for pytype/linters, as TF 1.15's

    def __init__(self, hparam_def=None, model_structure=None, **kwargs):
        self._hparam_types = {}
        self._model_structure = model_structure
        if hparam_def is not None:
            raise ValueError("HParams(hparam_def=...): reading an HParamDef proto is not provided by this TensorFlow "
                             "build; pass the values as keyword arguments or use parse_json")
        for name, value in kwargs.items():  # in the order given (Python 3.6 keeps it)
            self.add_hparam(name, value)

    def add_hparam(self, name, value):
        if getattr(self, name, None) is not None:
            raise ValueError("Hyperparameter name is reserved: %s" % name)
        if isinstance(value, (list, tuple)):
            if not value:
                raise ValueError("Multi-valued hyperparameters cannot be empty: %s" % name)
            self._hparam_types[name] = (type(value[0]), True)
        else:
            self._hparam_types[name] = (type(value), False)
        setattr(self, name, value)

    def set_hparam(self, name, value):
        kind, is_list = self._hparam_types[name]
        if isinstance(value, list):
            if not is_list:
                raise ValueError("Must not pass a list for single-valued parameter: %s" % name)
            setattr(self, name, [_cast(name, kind, v) for v in value])
        else:
            if is_list:
                raise ValueError("Must pass a list for multi-valued parameter: %s." % name)
            setattr(self, name, _cast(name, kind, value))

    def del_hparam(self, name):
        if hasattr(self, name):
            delattr(self, name)
            del self._hparam_types[name]

    def parse(self, values):
        """Override values from a string "a=1,b=[2,3],c[0]=4"; returns self."""
        type_map = dict((name, kind) for name, (kind, _) in self._hparam_types.items())
        return self.override_from_dict(parse_values(values, type_map))

    def override_from_dict(self, values_dict):
        for name, value in values_dict.items():
            self.set_hparam(name, value)  # a name[i]=v assignment's {i: v} is refused here, as by TF 1.15
        return self

    def set_model_structure(self, model_structure):
        self._model_structure = model_structure

    def get_model_structure(self):
        return self._model_structure

    def to_json(self, indent=None, separators=None, sort_keys=False):
        return json.dumps(self.values(), indent=indent, separators=separators, sort_keys=sort_keys)

    def parse_json(self, values_json):
        return self.override_from_dict(json.loads(values_json))

    def values(self):
        return dict((name, getattr(self, name)) for name in self._hparam_types)

    def get(self, key, default=None):
        if key not in self._hparam_types:
            return default
        if default is not None:
            kind, is_list = self._hparam_types[key]
            problem = None
            if is_list != isinstance(default, list):
                problem = "default=%s" % (default,)
            else:
                try:
                    for item in (default if is_list else [default]):
                        _cast(key, kind, item)
                except ValueError as error:
                    problem = "default=%s. %s" % (default, error)
            if problem:
                raise ValueError("Hparam '%s' of type '%s' is incompatible with %s" % (key, kind, problem))
        return getattr(self, key)

    def __contains__(self, key):
        return key in self._hparam_types

    def __str__(self):
        return ",".join("%s=%s" % item for item in self.values().items())

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, sorted(self.values().items()))


part(__name__, "see tf_slim.training, tf.train.checkpoints_iterator, and keep hyperparameters in a dict or "
               "absl flags")
