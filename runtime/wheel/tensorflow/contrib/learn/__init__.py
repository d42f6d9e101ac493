"""tf.contrib.learn: only ModeKeys, the mode names TF 1.x code (tensorflow/nmt, seq2seq, tensor2tensor) still
branches on; the rest of contrib.learn (Estimator, Experiment, RunConfig, datasets) became tf.estimator."""
from tensorflow.contrib import part


class ModeKeys(object):
    """TF 1.15's contrib.learn mode names: TRAIN, EVAL and INFER (tf.estimator.ModeKeys.PREDICT's value)."""

    TRAIN = "train"
    EVAL = "eval"
    INFER = "infer"

    @classmethod
    def validate(cls, key):
        if key not in (cls.TRAIN, cls.EVAL, cls.INFER):
            raise ValueError("Invalid mode %s." % key)


part(__name__, "tf.contrib.learn became tf.estimator (Estimator, RunConfig, ModeKeys) and tf.data")
