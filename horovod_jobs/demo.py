"""``make demo-horovod``: train a small MDLSTM digit-string reader under Horovod (2 local workers).

Run as ``horovodrun -np 2 -H localhost:2 --gloo python -m horovod_jobs.demo`` (or as one plain
process). Data: the embedded toy digit strings (:mod:`tfnhr.data.synthetic.digit_strings`), variable height
and width, fed as ragged batches that the MDLSTM layers pack into canvases (no padding).

Model: the recognizer of :mod:`tfnhr.models` with two levels, MDLSTM2D(4, 4 directions) ->
BlockConv2D(12, 2x2, tanh) -> MDLSTM2D(16, 4 directions) -> scores shared across directions per
pixel -> sum over height -> per-column scores -> its CTC loss (blank = index 0).

Distributed training follows the Keras 3 rules (docs/horovod.md): gradients averaged with
``hvd.grouped_allreduce`` inside our own step, variables broadcast from rank 0 once built, losses
averaged across ranks; only rank 0 prints and writes. At the end every rank's weights are checked
to be identical. Writes ``<out>/demo.json`` with the per-epoch history.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import horovod.tensorflow as hvd
import keras
import numpy as np
import tensorflow as tf

from tfnhr.charset import Charset
from tfnhr.data.dataset import IMAGES_SPEC, LABELS_SPEC, to_ragged_images, to_ragged_labels
from tfnhr.data.synthetic.digit_strings import ALPHABET, generate
from tfnhr.decoding import greedy_decode_batch
from tfnhr.evaluation.metrics import error_rate
from tfnhr.models import Recognizer, build_recognizer


def build_model(charset: Charset) -> Recognizer:
    """The demo reader: a two-level :class:`~tfnhr.models.Recognizer`, ragged ``[B, (H), (W), 1]``
    images -> ragged ``[B, (W/2), K]`` column scores."""
    return build_recognizer(charset, mdlstm_units=(4, 16), conv_filters=(12,), block=(2, 2), dropout=0.0)


def greedy_texts(model: Recognizer, images: tf.RaggedTensor) -> list[str]:
    """Best-path CTC decoding of the model's scores to digit strings."""
    return greedy_decode_batch([scores.numpy() for scores in model(images)], model.charset)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--train", type=int, default=512, help="training examples (all ranks together)")
    parser.add_argument("--val", type=int, default=64, help="validation examples")
    parser.add_argument("--batch", type=int, default=16, help="examples per rank and step")
    parser.add_argument("--lr", type=float, default=0.005)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/demo"))
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    keras.utils.set_random_seed(args.seed)
    train, val = generate(args.train, seed=args.seed), generate(args.val, seed=args.seed + 1)
    charset = Charset(ALPHABET, with_unknown=False)
    train_labels = [charset.encode(text) for text in train.texts]
    steps = args.train // (size * args.batch)
    if steps == 0:
        raise SystemExit(f"--train {args.train} is too small for {size} ranks x --batch {args.batch}")

    model = build_model(charset)
    optimizer = keras.optimizers.Adam(args.lr, global_clipnorm=10.0)

    @tf.function(input_signature=[IMAGES_SPEC, LABELS_SPEC])
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            loss = model.ctc_loss(labels, model(images, training=True))
        variables = model.trainable_variables
        gradients = hvd.grouped_allreduce(tape.gradient(loss, variables), op=hvd.Average)
        optimizer.apply(gradients, variables)
        return hvd.allreduce(loss, op=hvd.Average)

    optimizer.build(model.trainable_variables)
    for variable in model.variables + optimizer.variables:
        variable.assign(hvd.broadcast(variable.value, root_rank=0))

    val_images = to_ragged_images(val.images)
    history = []
    for epoch in range(1, args.epochs + 1):
        order = np.random.default_rng(args.seed + epoch).permutation(args.train)[rank::size]
        started, losses = time.perf_counter(), []
        for step in range(steps):
            batch = order[step * args.batch:(step + 1) * args.batch]
            losses.append(float(train_step(to_ragged_images([train.images[i] for i in batch]),
                                           to_ragged_labels([train_labels[i] for i in batch]))))
        seconds = time.perf_counter() - started
        cer = error_rate(val.texts, greedy_texts(model, val_images))
        history.append({"epoch": epoch, "loss": float(np.mean(losses)), "val_cer": cer, "seconds": seconds})
        if rank == 0:
            print(f"epoch {epoch:2d}/{args.epochs}  ctc loss {np.mean(losses):7.3f}  val CER {cer:6.1%}  "
                  f"{seconds:5.1f} s ({steps * args.batch * size / seconds:5.1f} examples/s, {size} workers)",
                  flush=True)

    checksums = hvd.allgather(tf.reshape(tf.add_n([tf.reduce_sum(v) for v in model.trainable_variables]), [1]))
    in_sync = bool(np.ptp(checksums.numpy()) == 0.0)
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "demo.json").write_text(json.dumps(
            {"workers": size, "history": history, "weights_identical_on_all_ranks": in_sync}, indent=2))
        shown = greedy_texts(model, to_ragged_images(val.images[:5]))
        for truth, guess in zip(val.texts[:5], shown):
            print(f"  truth {truth:>6}  read {guess:>6}")
        print(f"weights identical on all {size} ranks: {in_sync}; history in {args.out / 'demo.json'}")
    return 0 if in_sync else 1


if __name__ == "__main__":
    sys.exit(main())
