"""A parameter server started the usual way: import TensorFlow, start the server, join.

Usage: python ps_server.py CLUSTER_JSON TASK_INDEX. It builds no ops: the update ops of the variables
it holds arrive from the workers. Python 3.6+.
"""
import json
import sys

import tensorflow as tf

if not hasattr(tf, "placeholder"):  # a 2.x API: this launcher is TF 1.x code
    tf = tf.compat.v1

cluster = tf.train.ClusterSpec(json.loads(sys.argv[1]))
server = tf.train.Server(cluster, job_name="ps", task_index=int(sys.argv[2]))
server.join()
