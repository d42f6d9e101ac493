"""The switches a produced wheel acts on, and the environment variables it and the tool read: one table each.

A switch is declared once, as a row of FEATURES: its key in a recipe's [features] table and in the
wheel's settings, the environment variable that overrides the build's choice in one process, its
values and default, what it needs, and its words for the build summary and the reference page.
The recipe is validated against the rows, the build writes every switch's value into the settings
the bootstrap reads (with the variable's name, so the bootstrap declares none of them) and into the
wheel's provenance, `verify` reads them back from the provenance, and docs/reference.md is
generated from the rows. Adding a switch is one row plus the code that acts on it.
"""

from __future__ import annotations

from dataclasses import dataclass

ON_OFF = ("0", "1")  # a recipe writes false / true


@dataclass(frozen=True)
class Feature:
    key: str  # in [features] of a recipe and in the wheel's settings
    env: str | None  # the variable that overrides the build's choice in one process (None: the build's choice only)
    choices: tuple[str, ...]  # the values, as the wheel's settings and the variable spell them
    default: str
    block: str  # the injected call that reads it: "api" (expose_v1_api) or "ops" (register_ops)
    summary: str  # what a non-default value does, for the reference page and the bootstrap's messages
    note: str  # the build summary's words for a non-default value ({value}: the value)
    needs_ops: bool = True  # a non-default value runs retf kernels (False: TensorFlow's own ops, the 1.x API only)

    @property
    def needs(self) -> str:
        """What a non-default value needs in the recipe."""
        return 'api = "v1" and [ops] build = true' if self.needs_ops else 'api = "v1"'

    @property
    def old_key(self) -> str:
        """The top-level recipe key it had before [features] (still read, with a deprecation line)."""
        return f"v1_{self.key}"

    @property
    def on_off(self) -> bool:
        return self.choices == ON_OFF

    def from_recipe(self, value: object) -> str:
        """The settings text of a recipe's value; ValueError if the row does not take it."""
        if self.on_off:
            if not isinstance(value, bool):
                raise ValueError("expected true or false")
            return "1" if value else "0"
        if value not in self.choices:
            raise ValueError("expected " + " or ".join(f'"{c}"' for c in self.choices))
        return str(value)

    def recipe_text(self, value: str) -> str:
        """How a recipe writes ``value``."""
        if self.on_off:
            return "true" if value == "1" else "false"
        return f'"{value}"'

    def describe(self, value: str) -> str:
        """The build summary's words for ``value``; empty for the default."""
        return "" if value == self.default else self.note.format(value=value)


FEATURES: tuple[Feature, ...] = (
    Feature("sparse_adam", "RETF_SPARSE_ADAM", ("dense", "fused", "lazy"), "dense", "api",
            "how tf.train.AdamOptimizer applies sparse gradients: TensorFlow's ops (dense), the same results in one "
            "retf kernel (fused), or only the named rows (lazy, DeepRec's semantics)",
            "sparse Adam {value}"),
    Feature("fused_sparse", "RETF_FUSED_SPARSE", ON_OFF, "0", "api",
            "tf.train.AdagradOptimizer and FtrlOptimizer apply sparse gradients in retf's fused kernels",
            "fused sparse Adagrad and FTRL"),
    Feature("fused_embedding", "RETF_FUSED_EMBEDDING", ON_OFF, "0", "api",
            "tf.nn.embedding_lookup_sparse and safe_embedding_lookup_sparse (so feature columns' embeddings) run "
            "retf's fused lookups",
            "fused tf.nn.embedding_lookup_sparse and safe_embedding_lookup_sparse"),
    Feature("fused_matmul_grad", "RETF_FUSED_MATMUL_GRAD", ON_OFF, "0", "api",
            "a small weight's MatMul gradient comes from retf's transposed product, and a wide input's gradient at a "
            "batch of at most half its width from the swapped product's transpose",
            "small weights' MatMul gradients in retf's transposed product, wide inputs' at small batches swapped"),
    Feature("fused_concat_grad", "RETF_FUSED_CONCAT_GRAD", ON_OFF, "0", "api",
            "the gradient of a concat of x, y, x - y and x * y (DIN's activation unit) comes from one retf kernel",
            "DIN's activation-unit concat gradient in one retf kernel"),
    Feature("pair_dense_linear", "RETF_PAIR_DENSE_LINEAR", ON_OFF, "0", "api",
            "a dense layer over a concat of a query repeated over a sequence, the sequence, their difference and "
            "product (DIN's activation unit) computes as the sum of its pieces' products, the query's once per query, "
            "with no concat (TensorFlow's ops forward, retf's kernels for its gradient)",
            "DIN's activation-unit dense layer by its pieces' linearity"),
    Feature("fused_gru", "RETF_FUSED_GRU", ON_OFF, "0", "api",
            "tf.nn.dynamic_rnn over a tf.nn.rnn_cell.GRUCell runs its whole loop, and its gradient, as one retf kernel",
            "tf.nn.dynamic_rnn's GRUCell loop in one retf kernel"),
    Feature("small_batch_matmul", "RETF_SMALL_BATCH_MATMUL", ON_OFF, "0", "api",
            "tf.matmul over batches of small float32 matrices (attention's scores and weighted sums, and their "
            "gradients) runs retf's kernel for TensorFlow's BatchMatMulV2",
            "small batch products of tf.matmul in retf's kernel"),
    Feature("batch_moments", "RETF_BATCH_MOMENTS", ON_OFF, "0", "api",
            "tf.nn.moments over a matrix's rows and tf.nn.batch_normalization of a matrix (so tf.layers' and Keras's "
            "batch normalization of a dense layer) run retf's kernels, forward and gradient, in a pass or two each",
            "a dense layer's batch normalization in retf's kernels"),
    Feature("layer_norm_moments", "RETF_LAYER_NORM_MOMENTS", ON_OFF, "0", "api",
            "tf.keras.layers.LayerNormalization computes tf.nn.moments and tf.nn.batch_normalization, as TF 1.15's "
            "Keras does, instead of TF 2.x's FusedBatchNormV3 (TensorFlow's own ops: TF 1.15's arithmetic, faster on "
            "CPU)",
            "Keras's LayerNormalization in TF 1.15's moments form", needs_ops=False),
    Feature("layer_norm_kernels", "RETF_LAYER_NORM_KERNELS", ON_OFF, "0", "api",
            "tf.nn.moments over a tensor's last axis and tf.nn.batch_normalization with those moments (so "
            "tf.contrib.layers.layer_norm, BERT's layer_norm, and Keras's LayerNormalization in TF 1.15's form) run "
            "retf's kernels, forward and gradient, a row at a time",
            "layer normalization over the last axis in retf's kernels"),
    Feature("fast_decode_csv", "RETF_FAST_DECODE_CSV", ON_OFF, "0", "api",
            "DecodeCSV (tf.decode_csv, in tf.data functions too) runs retf's kernel: TensorFlow's results, faster",
            "DecodeCSV in retf's kernel"),
    Feature("fast_bias_grad", "RETF_FAST_BIAS_GRAD", ON_OFF, "0", "api",
            "BiasAddGrad (the bias gradient of tf.layers.dense, Keras's Dense and tf.nn.bias_add) runs retf's kernel: "
            "TensorFlow's column sums in one pass over the rows",
            "BiasAddGrad in retf's kernel"),
    Feature("large_block_allocator", "RETF_LARGE_BLOCK_ALLOCATOR", ON_OFF, "0", "ops",
            "TensorFlow's CPU allocator keeps freed blocks of 1 MiB or more for reuse (retf's large-block allocator)",
            "TensorFlow's CPU allocator keeps large blocks"),
    Feature("deeprec_optimizers", None, ON_OFF, "0", "api",
            "tf.train.AdamAsyncOptimizer and AdagradDecayOptimizer (DeepRec's optimizers) exist in the 1.x API",
            "DeepRec's AdamAsync and AdagradDecay optimizers"),
    Feature("deeprec_api", None, ON_OFF, "0", "api",
            "DeepRec's API in the 1.x API: EmbeddingVariable (tf.get_embedding_variable, "
            "tf.feature_column.categorical_column_with_embedding, its filters, evictions and checkpoints), "
            "DeepRec's optimizers, tf.staged, DeepRec's ConfigProto fields (do_op_fusion, micro_batch_num, ...), "
            "and its incremental-checkpoint arguments (saved as full checkpoints)",
            "DeepRec's API (EmbeddingVariable and its options, AdamAsync, AdagradDecay)"),
)

BY_KEY = {feature.key: feature for feature in FEATURES}
DEFAULTS: tuple[tuple[str, str], ...] = tuple((feature.key, feature.default) for feature in FEATURES)


def block_settings(values: tuple[tuple[str, str], ...], block: str) -> dict[str, dict]:
    """The switches one injected block reads, as its settings carry them: value, variable and values (a switch
    ``values`` leaves out has its default)."""
    chosen = {**dict(DEFAULTS), **dict(values)}
    return {f.key: {"value": chosen[f.key], "default": f.default, "env": f.env or "", "choices": list(f.choices),
                    "needs_ops": "1" if f.needs_ops else "0", "what": f.summary}
            for f in FEATURES if f.block == block}


@dataclass(frozen=True)
class Variable:
    """An environment variable read outside the switch rows: by the wheel at run time, or by the tool."""

    name: str
    values: str
    read_by: str  # where it is read
    summary: str


VARIABLES: tuple[Variable, ...] = (
    Variable("RETF_BOOTSTRAP", "0", "the wheel", "0: the bootstrap does nothing (no private runtime, dependencies, "
             "op library or 1.x API)"),
    Variable("RETF_BOOTSTRAP_DEBUG", "1", "the wheel", "1: log each bootstrap decision and its time to stderr"),
    Variable("RETF_RUNTIME_DEFAULTS", "0", "the wheel", "0: leave the build's [runtime_env] defaults out of the "
             "environment (a variable the user set always wins)"),
    Variable("RETF_API", "2", "the wheel", "2: in a 1.x API build, keep TensorFlow 2.x's API"),
    Variable("RETF_OPS", "0", "the wheel", "0: leave the retf op library unregistered; every switch falls back to "
             "TensorFlow's own ops"),
    Variable("RETF_TF115_EXPORTS", "0", "the wheel", "0: in a 1.x API build, write SavedModels and graphs in "
             "TensorFlow 2.x's form instead of TF 1.15's"),
    Variable("RETF_HEAP_TRIM", "0", "the wheel", "0: leave the heap as TensorFlow's checkpoint saves leave it (by "
             "default the heap's free pages go back to the system while and after a tf.compat.v1.train.Saver.save runs)"),
    Variable("RETF_PAGE_TRIM", "0", "the wheel", "0: keep resident the pages of TensorFlow's native libraries that "
             "only their loading read (by default the read-only ones go back to the page cache once the library has "
             "loaded, and come back on first use)"),
    Variable("RETF_DEFER_GC", "0", "the wheel", "0: keep Python's garbage collector running while `import tensorflow` "
             "runs (by default it is paused for the import and collects once at its end, however the import ends)"),
    Variable("RETF_SPLIT_DENSE_ADAM", "0 or 1", "the wheel (retf.train)", "1: fused sparse Adam decays the rows a "
             "gradient does not name in an op of their own, early in the step"),
    Variable("RETF_TRANSPOSED_MATMUL_ISA", "avx512, fma, avx or plain", "the wheel (the op library)",
             "caps the instruction set of retf's transposed product (default: the best the CPU has)"),
    Variable("RETF_BATCH_MATMUL_ISA", "fma, avx or plain", "the wheel (the op library)",
             "caps the instruction set of retf's batch product kernel (default: the best the CPU has)"),
    Variable("RETFWHEEL_CACHE_DIR", "a folder", "the tool", "where downloads, environments and compiled op libraries "
             "are cached (default: $XDG_CACHE_HOME/retfwheel, else ~/.cache/retfwheel)"),
    Variable("RETF_PYTHON36, RETF_PYTHON37, ...", "an interpreter", "the tool", "the target interpreter for a "
             "recipe's Python version, where --python is not given (then pyenv, then PATH)"),
    Variable("RETF_PROBE_EXTENSION", "a file", "the tool (verify)", "a prebuilt GLIBCXX_3.4.29 probe extension, "
             "for machines whose compiler cannot build it"),
)


def reference() -> list[str]:
    """The switches and variables as Markdown, for docs/reference.md."""
    lines = ["## Switches", "",
             "A recipe sets them in its `[features]` table (on/off switches take `true` or `false`); the build writes "
             "them into the wheel's settings and its provenance (`retfwheel.json`, `settings`). Where a switch has a "
             "variable, setting it overrides the build's choice in that process. Any value but the default needs "
             "`api = \"v1\"`; the switches that run retf kernels (all but "
             + ", ".join(f"`{f.key}`" for f in FEATURES if not f.needs_ops) + ", whose values keep to TensorFlow's own ops) "
             "also need `[ops] build = true`, and with `RETF_OPS=0` such a switch with a variable falls back to its "
             "default.", "",
             "| `[features]` key | variable | values | default | what a non-default value does |", "|---|---|---|---|---|"]
    for f in FEATURES:
        values = "`true`, `false`" if f.on_off else ", ".join(f"`\"{c}\"`" for c in f.choices)
        variable = f"`{f.env}`" if f.env else "(none: the build's choice)"
        lines.append(f"| `{f.key}` | {variable} | {values} | `{f.recipe_text(f.default)}` | {f.summary} |")
    lines += ["", "## Environment variables", "",
              "Besides the switches' variables:", "",
              "| variable | values | read by | what it does |", "|---|---|---|---|"]
    lines += [f"| `{v.name}` | {v.values} | {v.read_by} | {v.summary} |" for v in VARIABLES]
    return lines + [""]
