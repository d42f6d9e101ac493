"""A TF 1.15 Estimator exported for TF Serving: the standard recipe for a model that takes tf.Examples.

    python estimator_export.py WORK_DIR

tf.estimator.DNNLinearCombinedClassifier over hashed categorical columns (linear, and embedded for the DNN)
and a numeric one, trained 100 steps, then export_saved_model with
build_parsing_serving_input_receiver_fn(make_parse_example_spec(...)). export/request.json holds 32 serialized
examples and the probabilities Estimator.predict gives for them. Prints one JSON line.
"""
import base64
import json
import os
import sys

import numpy as np
import tensorflow as tf


def data(rng, count):
    features = {"user": np.array(["u%d" % i for i in rng.randint(0, 50, count)]),
                "item": np.array(["i%d" % i for i in rng.randint(0, 80, count)]),
                "price": rng.uniform(0, 10, count).astype(np.float32)}
    label = ((features["price"] > 5) ^ (rng.uniform(size=count) < 0.1)).astype(np.int64)
    return features, label


def example(features, row):
    proto = tf.train.Example()
    for name in ("user", "item"):
        proto.features.feature[name].bytes_list.value.append(features[name][row].encode("utf-8"))
    proto.features.feature["price"].float_list.value.append(float(features["price"][row]))
    return proto.SerializeToString()


def main(work_dir):
    tf.logging.set_verbosity(tf.logging.ERROR)
    features, label = data(np.random.RandomState(0), 512)
    user = tf.feature_column.categorical_column_with_hash_bucket("user", 100)
    item = tf.feature_column.categorical_column_with_hash_bucket("item", 100)
    price = tf.feature_column.numeric_column("price")
    config = tf.estimator.RunConfig(tf_random_seed=1, session_config=tf.ConfigProto(
        intra_op_parallelism_threads=1, inter_op_parallelism_threads=1))
    estimator = tf.estimator.DNNLinearCombinedClassifier(
        model_dir=os.path.join(work_dir, "model"), linear_feature_columns=[user, item],
        dnn_feature_columns=[tf.feature_column.embedding_column(user, 4), tf.feature_column.embedding_column(item, 4),
                             price],
        dnn_hidden_units=[8, 4], config=config)
    estimator.train(tf.estimator.inputs.numpy_input_fn(features, label, batch_size=32, num_epochs=None, shuffle=False),
                    steps=100)
    spec = tf.feature_column.make_parse_example_spec([user, item, price])
    exported = estimator.export_saved_model(os.path.join(work_dir, "exports"),
                                            tf.estimator.export.build_parsing_serving_input_receiver_fn(spec))
    served, _ = data(np.random.RandomState(1), 32)
    predictions = estimator.predict(tf.estimator.inputs.numpy_input_fn(served, shuffle=False))
    probabilities = [float(value) for prediction in predictions for value in prediction["probabilities"]]
    folder = os.path.join(work_dir, "export")
    os.makedirs(folder)
    os.rename(exported.decode("utf-8") if isinstance(exported, bytes) else exported, os.path.join(folder, "saved_model"))
    requests = [base64.b64encode(example(served, row)).decode("ascii") for row in range(32)]
    with open(os.path.join(folder, "request.json"), "w") as out:
        json.dump({"signature": "predict", "inputs": {"examples": {"bytes": requests}},
                   "predictions": {"probabilities": probabilities}}, out)
    print(json.dumps({"served": [folder], "global_step": estimator.get_variable_value("global_step").item()}))


if __name__ == "__main__":
    main(*sys.argv[1:])
