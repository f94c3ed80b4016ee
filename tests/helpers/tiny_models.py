"""Tiny recognizers that several test modules share: ``tiny_recognizer()`` (a built model with
fixed weights, for tests in this process) and ``TINY_MODEL`` (the ``tfnhr train`` flags of a
tiny model, for tests that train one through a command line)."""

from __future__ import annotations

import functools
import math

import numpy as np

from tfnhr.charset import Charset
from tfnhr.models import Recognizer, build_recognizer

CHARSET = Charset("ab c")  # 4 characters + unknown + blank = 6 classes
"""The charset of :func:`tiny_recognizer`."""
TINY = {"mdlstm_units": (2, 4, 6), "conv_filters": (3, 5)}
"""The sizes of :func:`tiny_recognizer`."""

TINY_MODEL = ["--units", "2,6,16", "--filters", "4,8", "--block", "2x2", "--height", "24"]
"""``tfnhr train`` (and ``train.py --task nhr``) flags of a tiny recognizer: MDLSTM units 2, 6,
16, block convolutions of 4 and 8 filters on 2x2 blocks, 24-pixel-high input."""


@functools.cache
def tiny_recognizer() -> Recognizer:
    """Tiny recognizer, block (2, 4), input height 16. Its weights are drawn from a fixed seed
    (Glorot-uniform-like matrices, non-zero biases so every weight matters, scaled-up scores so
    greedy decoding gives varied texts). Built once per process (the recognizer's and the
    callbacks' tests use it): every build costs seconds of tracing."""
    model = build_recognizer(CHARSET, **TINY, input_height=16)
    rng = np.random.default_rng(7)
    weights = []
    for w in model.get_weights():
        if w.ndim == 1 or w.shape[0] == 4 and w.ndim == 2:  # biases (MDLSTM bias: [D, G])
            weights.append(rng.normal(scale=0.3, size=w.shape))
        else:
            limit = math.sqrt(6.0 / (w.shape[-2] + w.shape[-1]))
            weights.append(rng.uniform(-limit, limit, size=w.shape))
    model.set_weights([w.astype(np.float32) for w in weights])
    model.scores.kernel.assign(model.scores.kernel * 4.0)
    return model
