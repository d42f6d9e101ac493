"""tf.contrib.estimator: the heads TF 1.15 Estimator model_fns use (the TF 1.x heads TensorFlow Estimator still
has, with contrib's default loss reduction, the mean over the batch), and add_metrics."""
from tensorflow.compat import v1 as _v1
from tensorflow.contrib import part
from tensorflow.python.ops import math_ops, nn
from tensorflow.python.ops.losses import losses
from tensorflow_estimator.python.estimator.canned import head as _head

add_metrics = _v1.estimator.add_metrics
_MEAN = losses.Reduction.SUM_OVER_BATCH_SIZE


def binary_classification_head(weight_column=None, thresholds=None, label_vocabulary=None, loss_reduction=_MEAN,
                               loss_fn=None, name=None):
    """A head for binary classification: sigmoid cross entropy, predictions with logistic and probabilities."""
    return _head._binary_logistic_head_with_sigmoid_cross_entropy_loss(
        weight_column=weight_column, thresholds=thresholds, label_vocabulary=label_vocabulary,
        loss_reduction=loss_reduction, loss_fn=loss_fn, name=name)


def multi_class_head(n_classes, weight_column=None, label_vocabulary=None, loss_reduction=_MEAN, loss_fn=None,
                     name=None):
    """A head for single-label classification over ``n_classes``: softmax cross entropy."""
    return _head._multi_class_head_with_softmax_cross_entropy_loss(
        n_classes=n_classes, weight_column=weight_column, label_vocabulary=label_vocabulary,
        loss_reduction=loss_reduction, loss_fn=loss_fn, name=name)


def regression_head(weight_column=None, label_dimension=1, loss_reduction=_MEAN, loss_fn=None, inverse_link_fn=None,
                    name=None):
    """A head for regression: mean squared error unless ``loss_fn``."""
    return _head._regression_head(weight_column=weight_column, label_dimension=label_dimension,
                                  loss_reduction=loss_reduction, loss_fn=loss_fn, inverse_link_fn=inverse_link_fn,
                                  name=name)


def poisson_regression_head(weight_column=None, label_dimension=1, loss_reduction=_MEAN, compute_full_loss=True,
                            name=None):
    """A regression head with Poisson loss on log-rate logits; predictions are exp(logits)."""
    def poisson_loss(labels, logits):
        return nn.log_poisson_loss(targets=labels, log_input=logits, compute_full_loss=compute_full_loss)

    return _head._regression_head(weight_column=weight_column, label_dimension=label_dimension,
                                  loss_reduction=loss_reduction, loss_fn=poisson_loss,
                                  inverse_link_fn=math_ops.exp, name=name)


def logistic_regression_head(weight_column=None, loss_reduction=_MEAN, name=None):
    """A regression head for labels in [0, 1]: sigmoid cross entropy; predictions are sigmoid(logits)."""
    def logistic_loss(labels, logits):
        labels = _head._assert_range(labels, n_classes=2, message="Labels must be in range [0, 1]")
        return nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)

    return _head._regression_head(weight_column=weight_column, label_dimension=1, loss_reduction=loss_reduction,
                                  loss_fn=logistic_loss, inverse_link_fn=math_ops.sigmoid, name=name)


part(__name__, "multi_head and multi_label_head became tf.estimator.MultiHead and tf.estimator.MultiLabelHead "
               "(TensorFlow 2.x heads); the canned estimators are in tf.estimator")
