"""retf's DecodeCSV kernel (ops/cc/kernels/decode_csv_kernels.cc) against TensorFlow's, record for record."""

import json
import subprocess
import sys
import unittest

import numpy as np
import tensorflow as tf

import retf


def decode_csv_sides(records, record_defaults, **attrs):
    """DecodeCSV on the same records in TensorFlow's kernel and in retf's (asked for by its kernel label):
    per side, ("ok", the outputs as lists) or ("error", the first line of its InvalidArgumentError)."""
    sides = []
    for label in (None, retf.ops.DECODE_CSV_LABEL):
        session, feed, outputs = _decoder(label, record_defaults, attrs)
        try:
            values = session.run(outputs, {feed: records})
        except tf.errors.InvalidArgumentError as error:
            sides.append(("error", error.message.split("\n")[0]))
        else:
            sides.append(("ok", [_comparable(np.asarray(v)) for v in values]))
    return sides


_DECODERS = {}


def _decoder(label, record_defaults, attrs):
    """A session running DecodeCSV with these defaults and attributes on a fed batch of records, under ``label``'s
    kernel (TensorFlow's for None): made once per kind of call, since the checks decode thousands of records."""
    key = repr((label, record_defaults, sorted(attrs.items())))
    if key not in _DECODERS:
        with tf.Graph().as_default() as graph:
            feed = tf.compat.v1.placeholder(tf.string, None)
            defaults = [tf.constant(value, dtype) for value, dtype in record_defaults]
            if label is None:
                outputs = tf.io.decode_csv(feed, defaults, **attrs)
            else:
                with graph._kernel_label_map({"DecodeCSV": label}):
                    outputs = tf.io.decode_csv(feed, defaults, **attrs)
        _DECODERS[key] = (tf.compat.v1.Session(graph=graph), feed, outputs)
    return _DECODERS[key]


def _comparable(values):
    """Strings as a list; numbers by their bytes, so that NaNs compare (and their bits too)."""
    content = values.tolist() if values.dtype == object else values.tobytes()
    return values.dtype.str, values.shape, content


STRING, INT32, INT64, FLOAT, DOUBLE = (([""], tf.string), ([0], tf.int32), ([0], tf.int64), ([0.0], tf.float32),
                                       ([0.0], tf.float64))
REQUIRED = {dtype: ([], dtype) for dtype in (tf.string, tf.int32, tf.int64, tf.float32, tf.float64)}


class DecodeCSVTest(unittest.TestCase):
    """retf's DecodeCSV kernel gives TensorFlow's outputs, and TensorFlow's first error, record for record."""

    @classmethod
    def tearDownClass(cls):
        for session, _, _ in _DECODERS.values():
            session.close()
        _DECODERS.clear()

    def assert_same(self, records, record_defaults, **attrs):
        stock, ours = decode_csv_sides(records, record_defaults, **attrs)
        self.assertEqual(ours, stock, "records {!r}, attrs {}".format(records, attrs))
        return stock

    def test_registered_under_its_label_and_not_as_the_default(self):
        from tensorflow.python.framework import kernels
        cpu = [(k.label, k.priority) for k in kernels.get_registered_kernels_for_op("DecodeCSV").kernel
               if k.device_type == "CPU"]
        self.assertIn((retf.ops.DECODE_CSV_LABEL, 0), cpu)
        self.assertNotIn(1, [priority for _, priority in cpu], "retf's kernel is DecodeCSV's default here: "
                                                                "these checks need TensorFlow's as the default")

    def test_wide_records_of_every_type(self):
        rng = np.random.RandomState(21)
        records = []
        for row in range(300):
            ids = "|".join(str(x) for x in rng.randint(0, 10 ** 6, rng.randint(1, 60)))
            records.append("{},{},{:.6g},{!r},u{},{},{}".format(
                row % 2, rng.randint(-2 ** 31, 2 ** 31), rng.uniform(-1e3, 1e3), rng.uniform(-1, 1),
                rng.randint(10 ** 6), ids, "" if row % 7 == 0 else "x" * (row % 40)))
        stock = self.assert_same(records, [INT32, INT64, FLOAT, DOUBLE, STRING, STRING, STRING])
        self.assertEqual(stock[0], "ok")
        self.assertEqual(len(stock[1][5][2]), 300)

    def test_numbers_parse_and_fail_as_tensorflows(self):
        texts = ["7", " 7", "7 ", "+7", "-0", "007", "2147483647", "2147483648", "-2147483649",
                 "9223372036854775807", "9223372036854775808", "1.", ".5", "5e", "1e-50", "1e39", "3.4028235e38",
                 "1e400", "nan", "NaN", "inf", "-inf", "Infinity", "0x1A", "1_0", "1,5", "abc", "1.5", "\t3"]
        for text in texts:
            for default in (INT32, INT64, FLOAT, DOUBLE, STRING):
                self.assert_same(['"{}"'.format(text) if "," in text else text], [default])

    def test_missing_and_na_fields(self):
        for dtype in (tf.string, tf.int32, tf.int64, tf.float32, tf.float64):
            default = {tf.string: (["d"], dtype)}.get(dtype, ([5], dtype))
            for records in (["1,,NA"], ["NA,1,"], [",,"], ["1,2,3"]):
                self.assert_same(records, [default, default, default], na_value="NA")
                stock = self.assert_same(records, [default, REQUIRED[dtype], default], na_value="NA")
                if records != ["1,2,3"] and records != ["NA,1,"]:
                    self.assertEqual(stock[0], "error")

    def test_quoted_fields(self):
        cases = ['"a,b",c', '"a""b",c', '"",x', 'x,""', '"x""","y"', '""""," "', 'a,"b"', '"a\nb",c',
                 # errors: a quote in an unquoted field, a lone quote inside a quoted one, no closing quote
                 'a"b,c', '"ab"c,d', '"abc,d', '"', 'a,"', 'a,"b""', '"a"b"",c']
        for record in cases:
            self.assert_same([record], [STRING, STRING])
        for record in ('a"b,c', '"a",b', 'x,"y"'):
            self.assert_same([record], [STRING, STRING], use_quote_delim=False)

    def test_delimiters_newlines_and_counts(self):
        for delim in ("|", "\t", " ", ";"):
            self.assert_same(["a{0}b{0}c".format(delim), "{0}{0}".format(delim), "1{0}2".format(delim)],
                             [STRING, STRING, STRING], field_delim=delim)
        cases = ["\na,b", "\r\na,b", "a,\r\nb", "a\n,b", "a,b\n", "a,b\r", "\n", "a,b,", "a,", "", ",",
                 "a,b,c", "a"]
        for record in cases:
            self.assert_same([record], [STRING, STRING])
        # The first bad record is the one reported.
        self.assert_same(["a,b", "a,b,c", "a"], [STRING, STRING])
        self.assert_same(["a,b", "x,1.5", "y,z"], [STRING, INT32])

    def test_selected_columns(self):
        records = ["a,b,c,d", "1,2,3,4"]
        for columns in ([0], [1, 3], [0, 2, 3], [3]):
            self.assert_same(records, [STRING] * len(columns), select_cols=columns)
        # Reading stops after the last selected column: a bad field past it is never seen.
        self.assert_same(['a,b,"c'], [STRING, STRING], select_cols=[0, 1])
        self.assert_same(['a,b,"c'], [STRING], select_cols=[2])
        self.assert_same(["a,b"], [STRING], select_cols=[4])
        self.assert_same(["a,b,"], [STRING], select_cols=[2])

    def test_shapes(self):
        self.assert_same("a,1", [STRING, INT32])
        self.assert_same([["a,1", "b,2", "c,3"], ["d,4", "e,5", "f,6"]], [STRING, INT32])
        self.assert_same(np.zeros([0], object), [STRING, INT32])
        self.assert_same(np.zeros([2, 0], object), [STRING, INT32])

    def test_random_records(self):
        rng = np.random.RandomState(22)
        short = list('a1,"\n\r .e-')
        long = list("a" * 40 + 'a1,"\n\r .e-')  # long runs: fields past the 16-character blocks of the scan
        for _ in range(200):
            for alphabet, length in ((short, 14), (long, 90)):
                record = "".join(rng.choice(alphabet, rng.randint(0, length)))
                for defaults in ([STRING] * 3, [FLOAT, STRING, INT64]):
                    self.assert_same([record], defaults)
                    self.assert_same([record], defaults[:2], use_quote_delim=False)

    def test_every_offset_of_a_long_field(self):
        for offset in range(40):
            for stop in (",", '"', "\n", "\r", "|"):
                record = "b" * offset + stop + "c" * (37 - offset) + ",d"
                for quoting in (True, False):
                    self.assert_same([record], [STRING, STRING], use_quote_delim=quoting)
                    self.assert_same([record], [STRING, STRING, STRING], use_quote_delim=quoting)
                    self.assert_same(['"' + record.replace('"', '""') + '",x'], [STRING, STRING])

    def test_use_fast_decode_csv_makes_it_every_nodes_kernel(self):
        """In a process of its own: afterwards, plain DecodeCSV nodes, in tf.data functions too, run it."""
        script = """
import json, sys
import tensorflow as tf
from tensorflow.python.framework import kernels
import retf

def priorities():
    return sorted(k.priority for k in kernels.get_registered_kernels_for_op("DecodeCSV").kernel
                  if k.device_type == "CPU" and not k.label)

lines = ["{},{},r{}".format(i, i * 0.25, "|".join(["7"] * (i % 9))) for i in range(50)]
before = priorities()
assert retf.ops.use_fast_decode_csv() and retf.ops.use_fast_decode_csv()
after = priorities()
dataset = tf.data.Dataset.from_tensor_slices(lines).batch(8).map(
    lambda x: tf.io.decode_csv(x, [[0], [0.0], [""]]))
values = [[v.numpy().tolist() for v in batch] for batch in dataset]
bad = None
try:
    tf.io.decode_csv(["1,2"], [[0], [0.0], [""]])
except tf.errors.InvalidArgumentError as error:
    bad = error.message.split("\\n")[0]
values = [[[x.decode() if isinstance(x, bytes) else x for x in column] for column in batch] for batch in values]
print(json.dumps({"before": before, "after": after, "values": values, "bad": bad}))
"""
        result = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                universal_newlines=True)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        seen = json.loads(result.stdout.strip().splitlines()[-1])
        self.assertEqual(seen["before"], [0])
        self.assertEqual(seen["after"], [0, 1])
        lines = ["{},{},r{}".format(i, i * 0.25, "|".join(["7"] * (i % 9))) for i in range(50)]
        fields = [line.split(",") for line in lines]
        expected = [[[int(f[0]) for f in fields[b:b + 8]], [float(f[1]) for f in fields[b:b + 8]],
                     [f[2] for f in fields[b:b + 8]]] for b in range(0, 50, 8)]
        self.assertEqual(seen["values"], expected)
        self.assertIn("Expect 3 fields but have 2 in record 0", seen["bad"])  # TF 2.13 prefixes the function
