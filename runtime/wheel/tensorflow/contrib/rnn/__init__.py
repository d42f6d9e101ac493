"""tf.contrib.rnn: TF 1.x's RNN cells and static RNNs (tf.compat.v1.nn), and core_rnn_cell's _Linear,
EmbeddingWrapper and OutputProjectionWrapper (written here)."""
from tensorflow.compat import v1 as _v1
from tensorflow.contrib.rnn.python.ops.core_rnn_cell import (  # noqa: F401
    EmbeddingWrapper,
    OutputProjectionWrapper,
    _Linear,
)

_cells = _v1.nn.rnn_cell
BasicLSTMCell = _cells.BasicLSTMCell
BasicRNNCell = _cells.BasicRNNCell
DeviceWrapper = _cells.DeviceWrapper
DropoutWrapper = _cells.DropoutWrapper
GRUCell = _cells.GRUCell
LSTMCell = _cells.LSTMCell
LSTMStateTuple = _cells.LSTMStateTuple
MultiRNNCell = _cells.MultiRNNCell
ResidualWrapper = _cells.ResidualWrapper
RNNCell = _cells.RNNCell
static_rnn = _v1.nn.static_rnn
static_bidirectional_rnn = _v1.nn.static_bidirectional_rnn
static_state_saving_rnn = _v1.nn.static_state_saving_rnn

__all__ = ["BasicLSTMCell", "BasicRNNCell", "DeviceWrapper", "DropoutWrapper", "EmbeddingWrapper", "GRUCell",
           "LSTMCell", "LSTMStateTuple", "MultiRNNCell", "OutputProjectionWrapper", "ResidualWrapper", "RNNCell",
           "static_rnn", "static_bidirectional_rnn", "static_state_saving_rnn"]
