"""Best-path (greedy) CTC decoding of per-column class scores into text.

Scores are ``[T, C]`` float arrays, one row per output column (``T`` columns), ``C =
charset.num_classes`` classes, class 0 the CTC blank; unnormalised logits or log-probabilities
(only their log-softmax matters).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tfnhr.charset import BLANK_INDEX, Charset


def log_softmax(scores: np.ndarray) -> np.ndarray:
    """Log-probabilities of finite scores over the last axis (same shape and float dtype)."""
    scores = np.asarray(scores)
    if not np.issubdtype(scores.dtype, np.floating):
        scores = scores.astype(np.float64)
    shifted = scores - scores.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def check_scores(scores: np.ndarray, charset: Charset) -> np.ndarray:
    """``scores`` as an array, after checking it is ``[T, charset.num_classes]`` and finite."""
    scores = np.asarray(scores)
    if scores.ndim != 2 or scores.shape[1] != charset.num_classes:
        raise ValueError(f"scores must be [T, {charset.num_classes}] for a charset of {len(charset)} "
                         f"characters plus the blank, got shape {scores.shape}")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores contain NaN or infinite values")
    return scores


def greedy_decode(scores: np.ndarray, charset: Charset) -> str:
    """Best-path text of ``scores [T, C]``: argmax per column, repeats collapsed, blanks dropped."""
    best = check_scores(scores, charset).argmax(axis=1)
    keep = best != BLANK_INDEX
    keep[1:] &= best[1:] != best[:-1]
    return charset.decode(best[keep])


def greedy_decode_batch(scores: Sequence[np.ndarray], charset: Charset) -> list[str]:
    """:func:`greedy_decode` of each ``[T_i, C]`` array."""
    return [greedy_decode(s, charset) for s in scores]


class GreedyDecoder:
    """:func:`greedy_decode` with its charset, as a decoder object (see :func:`tfnhr.decoding.make_decoder`)."""

    def __init__(self, charset: Charset) -> None:
        self.charset = charset

    def decode(self, scores: np.ndarray) -> str:
        """Best-path text of ``scores [T, C]``."""
        return greedy_decode(scores, self.charset)

    def decode_batch(self, scores_list: Sequence[np.ndarray]) -> list[str]:
        """:meth:`decode` of each ``[T_i, C]`` array."""
        return greedy_decode_batch(scores_list, self.charset)

    def reading_scores(self, texts: Sequence[str]) -> np.ndarray:
        """Zeros (float64 ``[N]``): the best path weighs texts by their CTC likelihood alone."""
        return np.zeros(len(texts))
