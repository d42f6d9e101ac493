"""TF 1.15's private names that TF 1.x-era libraries in the environment use and TF 2.x renamed or removed, given
back to TensorFlow's own modules as they load (Python 3.6, standard library and TensorFlow only):

- `ops._TensorLike`: standalone Keras 2.3's TensorFlow backend tests `isinstance(x, ops._TensorLike)`, the base of
  Tensor, SparseTensor and IndexedSlices, which TF 2.x calls types.internal.NativeObject (the same three classes);
- `pywrap_tensorflow.PyRecordReader_New`: TensorBoard 1.15 (the environment's `tensorboard` command, its
  EventAccumulator) reads event files with it; TF 2.2 removed it for a record iterator that resumes after the end.
"""


def tensor_like(ops):
    if not hasattr(ops, "_TensorLike"):
        from tensorflow.python.types import internal
        ops._TensorLike = internal.NativeObject


def record_reader(pywrap_tensorflow):
    if not hasattr(pywrap_tensorflow, "PyRecordReader_New"):
        pywrap_tensorflow.PyRecordReader_New = RecordReader


class RecordReader(object):
    """TF 1.15's PyRecordReader: GetNext() reads the next record or raises OutOfRangeError at the end (a later call
    reads what was appended since), record() returns it."""

    def __init__(self, filename, start_offset=0, compression_type=b"", status=None):
        from tensorflow.python.lib.io import _pywrap_record_io
        from tensorflow.python.util import compat
        if start_offset:
            raise ValueError("PyRecordReader_New: a start offset (%d) is not supported here" % start_offset)
        self._records = _pywrap_record_io.RecordIterator(compat.as_bytes(filename), compat.as_str(compression_type))
        self._record = None

    def GetNext(self):  # noqa: N802 (TF 1.15's name)
        from tensorflow.python.framework import errors
        try:
            self._record = next(self._records)
        except StopIteration:
            raise errors.OutOfRangeError(None, None, "End of file") from None

    def record(self):
        return self._record

    def Close(self):  # noqa: N802 (TF 1.15's name)
        self._records = iter(())
