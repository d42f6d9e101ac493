"""A TF 1.15 predictor: load exported models and answer each one's request, as a TF Serving client would see it.

    python serve_exports.py WORK_DIR FOLDER...

Each FOLDER holds request.json and either saved_model/ (loaded with tf.saved_model.loader.load, the request's
inputs fed through its signature) or frozen.pb (a frozen GraphDef, imported with tf.import_graph_def, the
request's feeds and fetches by tensor name); the outputs fetched are those the request has predictions for. One thread, so the same graph computes the same values on any side.
Prints one JSON line: by folder, the outputs (lists of floats) or the error that refused the model.
"""
import base64
import json
import os
import sys

import numpy as np
import tensorflow as tf

CONFIG = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)


def values(spec):
    if "bytes" in spec:
        return [base64.b64decode(item) for item in spec["bytes"]]
    if "strings" in spec:
        return np.array(spec["strings"], dtype=object)
    return np.array(spec["floats"] if "floats" in spec else spec["ints"])


def serve_saved_model(folder, request):
    with tf.Session(graph=tf.Graph(), config=CONFIG) as sess:
        meta_graph = tf.saved_model.loader.load(sess, [tf.saved_model.tag_constants.SERVING],
                                                os.path.join(folder, "saved_model"))
        signature = meta_graph.signature_def[request["signature"]]
        feeds = {signature.inputs[key].name: values(spec) for key, spec in request["inputs"].items()}
        fetches = {key: signature.outputs[key].name for key in request["predictions"]}
        return sess.run(fetches, feeds)


def serve_frozen_graph(folder, request):
    graph_def = tf.GraphDef()
    with tf.gfile.GFile(os.path.join(folder, "frozen.pb"), "rb") as source:
        graph_def.ParseFromString(source.read())
    with tf.Graph().as_default() as graph:
        tf.import_graph_def(graph_def, name="")
        with tf.Session(graph=graph, config=CONFIG) as sess:
            feeds = {name: values(spec) for name, spec in request["feeds"].items()}
            return sess.run(request["fetches"], feeds)


def main(work_dir, *folders):
    tf.logging.set_verbosity(tf.logging.ERROR)
    served = {}
    for folder in folders:
        with open(os.path.join(folder, "request.json")) as source:
            request = json.load(source)
        serve = serve_saved_model if "signature" in request else serve_frozen_graph
        try:
            outputs = serve(folder, request)
        except Exception as error:  # what refused this model, reported with the rest
            served[folder] = {"error": "%s: %s" % (type(error).__name__, str(error).splitlines()[0][:300])}
            continue
        served[folder] = {"outputs": {key: [float(v) for v in np.asarray(value).reshape(-1)]
                                      for key, value in outputs.items()}}
    print(json.dumps({"tensorflow": tf.__version__, "served": served}))


if __name__ == "__main__":
    main(*sys.argv[1:])
