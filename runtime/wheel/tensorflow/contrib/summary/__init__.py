"""tf.contrib.summary: TF 1.15's graph-mode summary API, which TensorFlow 2.x keeps in summary_ops_v2."""
from tensorflow.contrib import part
from tensorflow.python.ops.summary_ops_v2 import (  # noqa: F401
    SummaryWriter,
    always_record_summaries,
    audio,
    create_file_writer,
    create_summary_file_writer,
    eval_dir,
    flush,
    generic,
    histogram,
    image,
    import_event,
    initialize,
    never_record_summaries,
    record_summaries_every_n_global_steps,
    scalar,
    summary_writer_initializer_op,
)
from tensorflow.python.ops.summary_ops_v2 import _legacy_contrib_should_record_summaries as should_record_summaries  # noqa: F401
from tensorflow.python.ops.summary_ops_v2 import all_v2_summary_ops as all_summary_ops  # noqa: F401
from tensorflow.python.ops.summary_ops_v2 import graph_v1 as graph  # noqa: F401

part(__name__, "create_db_writer (SQLite) is gone; see tf.compat.v2.summary")
