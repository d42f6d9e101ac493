"""Unrolled sequence-to-sequence models, as TF 1.x code wrote them with tf.contrib.legacy_seq2seq.

    python legacy_seq2seq.py WORK_DIR [FROM_DIR]

Three parts in one graph, each in its own variable scope:
- "translate", the old translate tutorial's Seq2SeqModel (tf.contrib.legacy_seq2seq): embedding_attention_seq2seq
  over two GRU cells with an output projection and a sampled softmax loss, model_with_buckets over two buckets
  (encoder inputs reversed and padded, GO first, weights zero on padding), one SGD update per bucket on clipped
  gradients; the same model with feed_previous=True, its variables shared, decodes greedily through the projection.
- "char_rnn", char-rnn's language model (from tensorflow.contrib import legacy_seq2seq): rnn_decoder over two LSTM
  cells, a softmax_w / softmax_b projection, sequence_loss_by_example, Adam on clipped gradients; rnn_decoder with
  a loop_function samples greedily.
- "others", every other function once, small, untrained (imported from the module path
  tensorflow.contrib.legacy_seq2seq.python.ops.seq2seq): basic_rnn_seq2seq, tied_rnn_seq2seq, attention_decoder
  with two heads and initial_state_attention, and embedding_rnn_seq2seq, embedding_tied_rnn_seq2seq,
  one2many_rnn_seq2seq and embedding_attention_seq2seq without output projections, built first with feed_previous
  a boolean tensor (both decoders built, the variables made in tf.cond's first branch, tf.cond picks one), then
  again with feed_previous=False, the variables shared.
Trains 40 steps and saves; then restores FROM_DIR's checkpoint (another TensorFlow's) or its own, trains 8 more,
decodes and evaluates "others" (sequence_loss) both ways. Prints one JSON line.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf
from tensorflow.contrib import legacy_seq2seq
from tensorflow.contrib.legacy_seq2seq.python.ops import seq2seq as seq2seq_lib

PAD, GO, EOS = 0, 1, 2
SOURCE_VOCAB, TARGET_VOCAB, SIZE, BUCKETS, SAMPLES = 14, 12, 16, [(3, 5), (5, 7)], 6
CHARS, SEQ = 10, 6
BATCH, STEPS, MORE = 8, 40, 8


class Initializer(object):
    """Uniform(-scale, scale), each variable drawn with its own op seed in the order they are made. TF 1.x code
    leaves the op seed to the graph seed, which TF 1.15 and 2.x turn into different op seeds; one seed for all
    would give variables of the same shape the same values (and a swapped variable would go unnoticed)."""

    def __init__(self, scale, seed):
        self.scale, self.seed = scale, seed

    def __call__(self, shape, dtype=tf.float32, partition_info=None):
        self.seed += 1
        return tf.random_uniform(shape, -self.scale, self.scale, dtype, seed=self.seed)


def make_pairs(rng, count, bucket):
    """(source, target) token lists that fit the bucket: the target is the source reversed, in its own vocabulary."""
    shortest, longest = (2, 3) if bucket == 0 else (4, 5)
    pairs = []
    for _ in range(count):
        source = [int(t) for t in rng.randint(4, SOURCE_VOCAB, rng.randint(shortest, longest + 1))]
        pairs.append((source, [4 + s % 8 for s in reversed(source)]))
    return pairs


def get_batch(pairs, bucket):
    """The tutorial's time-major batch: reversed padded encoder inputs, GO + target + EOS + padding, weights."""
    encoder_size, decoder_size = BUCKETS[bucket]
    encoders = [list(reversed(s + [PAD] * (encoder_size - len(s)))) for s, _ in pairs]
    decoders = [[GO] + t + [EOS] + [PAD] * (decoder_size - len(t) - 2) for _, t in pairs]
    encoder_inputs = [np.array([e[i] for e in encoders], np.int32) for i in range(encoder_size)]
    decoder_inputs = [np.array([d[i] for d in decoders], np.int32) for i in range(decoder_size)]
    weights = [np.array([0.0 if i == decoder_size - 1 or d[i + 1] == PAD else 1.0 for d in decoders], np.float32)
               for i in range(decoder_size)]
    return encoder_inputs, decoder_inputs, weights


def build_translate():
    encoder_inputs = [tf.placeholder(tf.int32, [None], name="encoder%d" % i) for i in range(BUCKETS[-1][0])]
    decoder_inputs = [tf.placeholder(tf.int32, [None], name="decoder%d" % i) for i in range(BUCKETS[-1][1] + 1)]
    target_weights = [tf.placeholder(tf.float32, [None], name="weight%d" % i) for i in range(BUCKETS[-1][1] + 1)]
    targets = decoder_inputs[1:]
    with tf.variable_scope("translate", initializer=Initializer(0.1, 1000)):
        w_t = tf.get_variable("proj_w", [TARGET_VOCAB, SIZE])
        b = tf.get_variable("proj_b", [TARGET_VOCAB])
        output_projection = (tf.transpose(w_t), b)

        def sampled_loss(labels, logits):
            return tf.nn.sampled_softmax_loss(weights=w_t, biases=b, labels=tf.reshape(labels, [-1, 1]),
                                              inputs=logits, num_sampled=SAMPLES, num_classes=TARGET_VOCAB, seed=92)

        def seq2seq_f(encoder, decoder, do_decode):
            # A cell per call: TF 1.15 cannot deepcopy a cell once used (the tutorial's fix for TF >= 1.2).
            cell = tf.contrib.rnn.MultiRNNCell([tf.contrib.rnn.GRUCell(SIZE) for _ in range(2)])
            return tf.contrib.legacy_seq2seq.embedding_attention_seq2seq(
                encoder, decoder, cell, num_encoder_symbols=SOURCE_VOCAB, num_decoder_symbols=TARGET_VOCAB,
                embedding_size=SIZE, output_projection=output_projection, feed_previous=do_decode, dtype=tf.float32)

        _, losses = tf.contrib.legacy_seq2seq.model_with_buckets(
            encoder_inputs, decoder_inputs, targets, target_weights, BUCKETS, lambda x, y: seq2seq_f(x, y, False),
            softmax_loss_function=sampled_loss)
        params = tf.trainable_variables()
        learning_rate = tf.Variable(0.5, trainable=False, dtype=tf.float32)
        global_step = tf.Variable(0, trainable=False)
        optimizer = tf.train.GradientDescentOptimizer(learning_rate)
        updates = []
        for loss in losses:
            clipped, _ = tf.clip_by_global_norm(tf.gradients(loss, params), 5.0)
            updates.append(optimizer.apply_gradients(zip(clipped, params), global_step=global_step))
        with tf.variable_scope(tf.get_variable_scope(), reuse=True):
            greedy, _ = tf.contrib.legacy_seq2seq.model_with_buckets(
                encoder_inputs, decoder_inputs, targets, target_weights, BUCKETS, lambda x, y: seq2seq_f(x, y, True),
                softmax_loss_function=sampled_loss)
        logits = [[tf.matmul(o, output_projection[0]) + b for o in outputs] for outputs in greedy]
        decoded = [tf.stack([tf.argmax(step, 1) for step in steps], 1) for steps in logits]
        greedy_losses = [tf.contrib.legacy_seq2seq.sequence_loss(steps, targets[:len(steps)],
                                                                 target_weights[:len(steps)]) for steps in logits]
    return (encoder_inputs, decoder_inputs, target_weights), losses, updates, (decoded, greedy_losses)


def translate_feed(placeholders, batch, bucket):
    encoder_inputs, decoder_inputs, target_weights = placeholders
    encoder_size, decoder_size = BUCKETS[bucket]
    feed = dict(zip(encoder_inputs[:encoder_size], batch[0]))
    feed.update(zip(decoder_inputs[:decoder_size], batch[1]))
    feed.update(zip(target_weights[:decoder_size], batch[2]))
    feed[decoder_inputs[decoder_size]] = np.zeros([len(batch[0][0])], np.int32)
    return feed


def build_char_rnn():
    input_data = tf.placeholder(tf.int32, [BATCH, SEQ], name="input_data")
    targets = tf.placeholder(tf.int32, [BATCH, SEQ], name="targets")
    with tf.variable_scope("char_rnn", initializer=Initializer(0.1, 2000)):
        cell = tf.contrib.rnn.MultiRNNCell([tf.contrib.rnn.LSTMCell(SIZE) for _ in range(2)], state_is_tuple=True)
        with tf.variable_scope("rnnlm"):
            softmax_w = tf.get_variable("softmax_w", [SIZE, CHARS])
            softmax_b = tf.get_variable("softmax_b", [CHARS])
        embedding = tf.get_variable("embedding", [CHARS, SIZE])
        inputs = tf.split(tf.nn.embedding_lookup(embedding, input_data), SEQ, 1)
        inputs = [tf.squeeze(input_, [1]) for input_ in inputs]

        def loop(prev, _):
            prev_symbol = tf.stop_gradient(tf.argmax(tf.matmul(prev, softmax_w) + softmax_b, 1))
            return tf.nn.embedding_lookup(embedding, prev_symbol)

        outputs, _ = legacy_seq2seq.rnn_decoder(inputs, cell.zero_state(BATCH, tf.float32), cell, scope="rnnlm")
        logits = tf.matmul(tf.reshape(tf.concat(outputs, 1), [-1, SIZE]), softmax_w) + softmax_b
        loss = legacy_seq2seq.sequence_loss_by_example([logits], [tf.reshape(targets, [-1])],
                                                       [tf.ones([BATCH * SEQ])])
        cost = tf.reduce_sum(loss) / BATCH / SEQ
        tvars = [v for v in tf.trainable_variables() if v.name.startswith("char_rnn/")]
        grads, _ = tf.clip_by_global_norm(tf.gradients(cost, tvars), 5.0)
        train_op = tf.train.AdamOptimizer(0.01).apply_gradients(zip(grads, tvars))
        start = tf.constant([3, 8])
        with tf.variable_scope(tf.get_variable_scope(), reuse=True):
            first = tf.nn.embedding_lookup(embedding, start)
            sampled, _ = legacy_seq2seq.rnn_decoder([first] * 8, cell.zero_state(2, tf.float32), cell,
                                                    loop_function=loop, scope="rnnlm")
        samples = tf.stack([tf.argmax(tf.matmul(o, softmax_w) + softmax_b, 1) for o in sampled], 1)
    return (input_data, targets), cost, train_op, samples


def make_text(rng, count):
    text = np.zeros([count * BATCH, SEQ + 1], np.int32)
    text[:, 0] = rng.randint(0, CHARS, len(text))
    for i in range(1, SEQ + 1):
        follows = (text[:, i - 1] * 3 + 1) % CHARS
        text[:, i] = np.where(rng.rand(len(text)) < 0.2, rng.randint(0, CHARS, len(text)), follows)
    return text


def build_others():
    """Every other function's sequence_loss, and those of the ones that take feed_previous given it as a tensor."""
    steps, vocab, small = 4, 10, 8
    encoder = [tf.placeholder(tf.int32, [None], name="zoo_encoder%d" % i) for i in range(steps)]
    decoder = [tf.fill(tf.shape(encoder[0]), GO)] + encoder[:0:-1]  # GO, then the source reversed
    targets = encoder[::-1]
    weights = [tf.ones_like(t, dtype=tf.float32) for t in targets]
    gru, lstm = tf.contrib.rnn.GRUCell, tf.contrib.rnn.LSTMCell

    def one_hot(ids):
        return [tf.one_hot(i, vocab) for i in ids]

    def decoders(feed_previous):
        outputs = {}
        outputs["embedding"], _ = seq2seq_lib.embedding_rnn_seq2seq(encoder, decoder, lstm(small), vocab, vocab, 6,
                                                                    feed_previous=feed_previous)
        outputs["embedding_tied"], _ = seq2seq_lib.embedding_tied_rnn_seq2seq(
            encoder, decoder, gru(small), vocab, 6, num_decoder_symbols=small, feed_previous=feed_previous)
        many, _ = seq2seq_lib.one2many_rnn_seq2seq(encoder, {"a": decoder, "b": [d % small for d in decoder]},
                                                   gru(small), {"a": gru(small), "b": gru(small)}, vocab,
                                                   {"a": vocab, "b": small}, 6, feed_previous=feed_previous)
        outputs["one2many_a"], outputs["one2many_b"] = many["a"], many["b"]
        outputs["embedding_attention"], _ = seq2seq_lib.embedding_attention_seq2seq(
            encoder, decoder, lstm(small), vocab, vocab, 6, feed_previous=feed_previous)
        return outputs

    def report(outputs):
        """Each model's sequence_loss and its logits for the first two examples, flat."""
        reports = {}
        for name, logits in outputs.items():
            classes = int(logits[0].shape[1])
            loss = seq2seq_lib.sequence_loss(logits, [t % classes for t in targets], weights)
            reports[name] = (loss, tf.reshape(tf.stack(logits, 1)[:2], [-1]))
        return reports

    feed_previous = tf.placeholder_with_default(False, [], name="feed_previous")
    with tf.variable_scope("others", initializer=Initializer(0.5, 3000)) as scope:
        either = decoders(feed_previous)  # the variables made in tf.cond's first branch
        outputs = {}
        outputs["basic"], _ = seq2seq_lib.basic_rnn_seq2seq(one_hot(encoder), one_hot(decoder), gru(small))
        outputs["tied"], _ = seq2seq_lib.tied_rnn_seq2seq(one_hot(encoder), one_hot(decoder), gru(small))
        embedding = tf.get_variable("embedding", [vocab, 6])
        encoder_outputs, encoder_state = tf.nn.static_rnn(
            lstm(small), [tf.nn.embedding_lookup(embedding, i) for i in encoder], dtype=tf.float32, scope="encoder")
        outputs["attention"], _ = seq2seq_lib.attention_decoder(
            [tf.nn.embedding_lookup(embedding, i) for i in decoder], encoder_state, tf.stack(encoder_outputs, 1),
            lstm(small), output_size=vocab, num_heads=2, initial_state_attention=True)
    with tf.variable_scope(scope, reuse=True):
        outputs.update(decoders(False))
    ids = dict((name, tf.stack([tf.argmax(o, 1) for o in logits], 1)) for name, logits in either.items())
    return encoder, feed_previous, report(outputs), report(either), ids


def main(work_dir, from_dir=None):
    tf.set_random_seed(90)
    translate, losses, updates, (decoded, greedy_losses) = build_translate()
    char_rnn, cost, lm_train, samples = build_char_rnn()
    encoder, feed_previous, plain_report, either_report, either_ids = build_others()
    rng = np.random.RandomState(10)
    translate_batches = [get_batch(make_pairs(rng, BATCH, step % 2), step % 2) for step in range(STEPS + MORE)]
    text = make_text(np.random.RandomState(11), STEPS + MORE)
    sources = np.random.RandomState(12).randint(2, 10, [BATCH, 4]).astype(np.int32)
    test_rng = np.random.RandomState(13)
    tests = [get_batch(make_pairs(test_rng, 4, bucket), bucket) for bucket in range(2)]
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    saver = tf.train.Saver()

    def train(sess, step):
        bucket, rows = step % 2, slice(step * BATCH, (step + 1) * BATCH)
        feed = translate_feed(translate, translate_batches[step], bucket)
        loss = sess.run([losses[bucket], updates[bucket]], feed)[0]
        lm_loss = sess.run([cost, lm_train], {char_rnn[0]: text[rows, :-1], char_rnn[1]: text[rows, 1:]})[0]
        return [float(loss), float(lm_loss)]

    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        trained = [train(sess, step) for step in range(STEPS)]
        path = saver.save(sess, os.path.join(work_dir, "model"))
        variables = sorted("%s %s" % (v.op.name, v.shape.as_list()) for v in tf.global_variables())
    with tf.Session(config=config) as sess:
        saver.restore(sess, tf.train.latest_checkpoint(from_dir) if from_dir else path)
        resumed = [train(sess, step) for step in range(STEPS, STEPS + MORE)]
        greedy = [sess.run([decoded[bucket], greedy_losses[bucket]], translate_feed(translate, tests[bucket], bucket))
                  for bucket in range(2)]
        sampled = sess.run(samples).tolist()
        zoo_feed = dict(zip(encoder, sources.T))
        plain, teacher_forced = sess.run([plain_report, either_report], zoo_feed)
        zoo_feed[feed_previous] = True
        fed_back, fed_back_ids = sess.run([either_report, either_ids], zoo_feed)
    print(json.dumps({
        "losses": [step[0] for step in trained], "resumed_losses": [step[0] for step in resumed],
        "lm_losses": [step[1] for step in trained], "resumed_lm_losses": [step[1] for step in resumed],
        "variables": variables, "decoded": [ids.tolist() for ids, _ in greedy],
        "greedy_losses": [float(loss) for _, loss in greedy], "sampled": sampled,
        "others": dict((name, float(loss)) for name, (loss, _) in plain.items()),
        "others_logits": dict((name, logits.tolist()) for name, (_, logits) in plain.items()),
        "others_teacher_forced": dict((name, float(loss)) for name, (loss, _) in teacher_forced.items()),
        "others_fed_back": dict((name, float(loss)) for name, (loss, _) in fed_back.items()),
        "others_fed_back_logits": dict((name, logits.tolist()) for name, (_, logits) in fed_back.items()),
        "others_decoded": dict((name, ids.tolist()) for name, ids in fed_back_ids.items())}, sort_keys=True))


if __name__ == "__main__":
    main(*sys.argv[1:])
