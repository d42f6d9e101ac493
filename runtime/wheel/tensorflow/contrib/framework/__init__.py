"""tf.contrib.framework: tf_slim's arg_scope and variables functions, and TensorFlow's own versions of the rest."""
from tensorflow.contrib import part, require_tf_slim

require_tf_slim("framework")
from tensorflow.python.framework.ops import get_name_scope, prepend_name_scope, strip_name_scope  # noqa: E402,F401
from tensorflow.python.framework.smart_cond import smart_case, smart_cond, smart_constant_value  # noqa: E402,F401
from tensorflow.python.framework.sparse_tensor import convert_to_tensor_or_sparse_tensor  # noqa: E402,F401
from tensorflow.python.framework.tensor_spec import BoundedTensorSpec, TensorSpec  # noqa: E402,F401
from tensorflow.python.framework.tensor_util import is_tensor  # noqa: E402,F401
from tensorflow.python.ops.check_ops import assert_scalar  # noqa: E402,F401
from tensorflow.python.ops.script_ops import py_func  # noqa: E402,F401
from tensorflow.python.ops.sort_ops import argsort, sort  # noqa: E402,F401
from tensorflow.python.training.checkpoint_utils import (  # noqa: E402,F401
    init_from_checkpoint,
    list_variables,
    load_checkpoint,
    load_variable,
)
from tensorflow.python.util import nest  # noqa: E402,F401
from tensorflow.python.util.deprecation import deprecated, deprecated_arg_values, deprecated_args  # noqa: E402,F401
from tf_slim.ops.arg_scope import *  # noqa: E402,F401,F403
from tf_slim.ops.variables import *  # noqa: E402,F401,F403

part(__name__, "see tf.train (checkpoint utilities, warm starting), tf.compat.v1.get_variable and tf.debugging")
