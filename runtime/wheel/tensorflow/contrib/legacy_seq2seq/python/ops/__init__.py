"""tensorflow.contrib.legacy_seq2seq.python.ops: the module path TF 1.x code imports legacy_seq2seq from
(`from tensorflow.contrib.legacy_seq2seq.python.ops import seq2seq`); its seq2seq is tf.contrib.legacy_seq2seq."""
import sys

from tensorflow.contrib import legacy_seq2seq as seq2seq

sys.modules[__name__ + ".seq2seq"] = seq2seq
