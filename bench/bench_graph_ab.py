"""One model's training step with and without one of retf's graph changes, in one process, in turns.

    retfwheel run --recipe recipes/emulated-py36-tf1api.toml --env VENV \
        python bench/bench_graph_ab.py --model din --change concat --data taobao.csv [--blocks 24]

Builds the model twice in one process (bench/models/, Adam, the model's batch): graph A with the change
(--change concat: the gradients of the activation unit's concat and of the dense layer after it from
retf's kernels, as fused_concat_grad routes them; --change dense: the dense layer's alone, the concat's
routed on both sides; both as one product over the concat; --change linear: the dense layer by its pieces'
linearity, as pair_dense_linear computes it, against one product whose gradients are routed; --change split:
retf.train.AdamOptimizer's early decay of untouched rows, RETF_SPLIT_DENSE_ADAM=1; --change safe: feature columns'
safe_embedding_lookup_sparse as retf's one fused op, against TensorFlow's function around retf's fused lookup, as
fused_embedding routed it before the safe op; --change bias: the dense layers' BiasAddGrad on retf's kernel, as
fast_bias_grad labels it, against TensorFlow's), graph B without it, each in
its own session on the same data (--batch-size replaces the model's batch). Then it runs blocks of 20 steps, A
and B in turns (the order flipping every block), and prints the median step time of each and the median of the
per-block ratio B/A: above 1, the change is faster. Between processes
this machine's speed moves by up to 10%, which hides a change of a few percent; within one process both
graphs share the allocator, the thread pools and the machine's state. Python 3.6; run by the wheel's
interpreter (the 1.x API).
"""

import argparse
import json
import os
import sys
import time

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
sys.path.insert(0, MODELS)

import common  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

BLOCK_STEPS = 20
# The model's input module and batch, as bench_models.py runs them.
MODEL_INPUTS = {"din": ("taobao", 512), "dien": ("taobao", 128), "dssm": ("taobao", 4096), "mmoe": ("taobao", 512),
                "wide_deep": ("criteo", 1024), "deepfm": ("criteo", 1024), "dlrm": ("criteo", 1024),
                "dcn": ("criteo", 1024), "dcnv2": ("criteo", 1024)}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, choices=sorted(MODEL_INPUTS))
    parser.add_argument("--change", required=True, choices=["bias", "concat", "dense", "linear", "safe", "split"])
    parser.add_argument("--data", required=True, help="the model's CSV (bench_models.py writes them)")
    parser.add_argument("--blocks", type=int, default=24, help="blocks of %d steps per side" % BLOCK_STEPS)
    parser.add_argument("--batch-size", type=int, help="the batch (default: the model's, as bench_models.py runs it)")
    return parser.parse_args()


def gradient_registry():
    from tensorflow.python.framework import ops as framework_ops  # the gradient registry has no public name
    return framework_ops._gradient_registry._registry


def set_concat_routing(on):
    """retf's concat gradient on or off for the graphs built next (whatever the bootstrap installed)."""
    import retf.ops
    registry = gradient_registry()
    retf.ops.route_pair_concat_gradients()
    if not on:
        for name in ("ConcatV2", "Sub", "Mul", "MatMul", "Tile"):
            registry[name]["type"] = without_route(registry[name]["type"], ("pair concat", "pair dense"))


def set_linear_products(on):
    """A dense layer over the activation unit's concat by its pieces (pair_dense_linear) on or off for the graphs
    built next (whatever the bootstrap installed)."""
    from tensorflow.python.ops import gen_math_ops  # math_ops.matmul reads the wrapper from it at each call

    import retf.ops
    retf.ops.route_pair_dense_products()
    if not on:
        gen_math_ops.mat_mul = gen_math_ops.mat_mul.original


def set_safe_lookup(on):
    """Feature columns' safe_embedding_lookup_sparse as retf's fused op, or as TensorFlow's function around retf's
    fused embedding_lookup_sparse, for the graphs built next."""
    from tensorflow.python.ops import embedding_ops

    import retf.nn
    embedding_ops.embedding_lookup_sparse = retf.nn.embedding_lookup_sparse
    embedding_ops.safe_embedding_lookup_sparse = (retf.nn.safe_embedding_lookup_sparse if on
                                                  else retf.nn._STOCK_SAFE_LOOKUP)


def set_bias_gradients(on):
    """BiasAddGrad on retf's kernel (fast_bias_grad's label) or TensorFlow's for the graphs built next."""
    from tensorflow.python.ops import gen_nn_ops  # nn_grad reads the wrapper from it at each call

    import retf.ops
    retf.ops.route_bias_gradients()
    if not on:
        gen_nn_ops.bias_add_grad = gen_nn_ops.bias_add_grad.original


def without_route(function, routes):
    """function, a registered gradient function, without the retf routings named routes wrapped around it
    (the concat's are the outermost: the bootstrap installs them last)."""
    while getattr(function, "route", None) in routes:
        function = function.original
    return function


def build(model, inputs, data, batch):
    """A session, its fetches and the graph's retf op types (and TensorFlow's ops labelled for retf's kernels, as
"Op:retf"), for one training graph of model."""
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(1)
        features, labels = inputs.input_fn(data, batch)
        tasks = common.task_logits(model.logits(features), labels)
        loss = tf.add_n([tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels[name], logits=logit))
                         for name, logit in tasks.items()])
        optimizer, _ = common.optimizer("adam", 0.001)
        train = optimizer.minimize(loss, global_step=tf.train.get_or_create_global_step())
        types = sorted({op.type for op in graph.get_operations() if op.type.startswith("Retf>")}
                       | {op.type + ":retf" for op in graph.get_operations()
                          if op.node_def.attr["_kernel"].s == b"retf"})
        session = tf.Session(graph=graph)
        session.run([tf.global_variables_initializer(), tf.local_variables_initializer(), tf.tables_initializer()])
    return session, [loss, train], types


def main():
    args = parse_args()
    tf.logging.set_verbosity(tf.logging.ERROR)
    model = __import__(args.model)
    inputs_name, batch = MODEL_INPUTS[args.model]
    batch = args.batch_size or batch
    inputs = __import__(inputs_name)
    built = {}
    for side, on in (("B", False), ("A", True)):  # B first: routing is process-wide once installed
        if args.change == "concat":
            set_concat_routing(on)
            set_linear_products(False)
        elif args.change == "linear":
            set_concat_routing(True)
            set_linear_products(on)
        elif args.change == "dense":
            set_concat_routing(True)
            set_linear_products(False)
            if not on:
                registry = gradient_registry()
                registry["MatMul"]["type"] = without_route(registry["MatMul"]["type"], ("pair dense",))
        elif args.change == "safe":
            set_safe_lookup(on)
        elif args.change == "bias":
            set_bias_gradients(on)
        else:
            set_concat_routing(True)
            os.environ["RETF_SPLIT_DENSE_ADAM"] = "1" if on else "0"
        built[side] = build(model, inputs, args.data, batch)
    for session, fetches, _ in built.values():
        for _ in range(10):  # warm-up: the first runs prune and optimize the graph
            session.run(fetches)
    times = {"A": [], "B": []}
    for block in range(args.blocks):
        for side in ("A", "B") if block % 2 == 0 else ("B", "A"):
            session, fetches, _ = built[side]
            start = time.perf_counter()
            for _ in range(BLOCK_STEPS):
                session.run(fetches)
            times[side].append((time.perf_counter() - start) / BLOCK_STEPS * 1000)
    ratios = [b / a for a, b in zip(times["A"], times["B"])]
    print(json.dumps({"model": args.model, "change": args.change, "batch": batch, "blocks": args.blocks,
                      "retf_ops": {side: built[side][2] for side in built},
                      "ms_per_step": {side: round(float(np.median(times[side])), 2) for side in times},
                      "b_over_a": round(float(np.median(ratios)), 3),
                      "b_over_a_range": [round(min(ratios), 3), round(max(ratios), 3)]}))


if __name__ == "__main__":
    main()
