"""Running a trained recognizer: column scores for images, decoding, CER/WER tables.

Used by ``tfnhr evaluate`` / ``tfnhr recognize`` and by notebooks.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np

from tfnhr.metrics import error_rate

Decoder = Callable[[Sequence[np.ndarray]], list[str]]
"""Column scores ``[T_i, K]`` per image -> one text per image."""


def column_scores(model, grays: Sequence[np.ndarray], batch_pixels: int = 400_000) -> list[np.ndarray]:
    """Per-image column scores ``[T_i, K]`` (float32 logits) of uint8 ``[H_i, W_i]`` grays, in
    order, scaled to the model's ``input_height`` (if it has one) and run in batches of at most
    ``batch_pixels`` pixels."""
    from tfnhr.data.images import scale_to_height
    from tfnhr.data.pipeline import pixel_budget_batches, ragged_batch

    grays = [scale_to_height(gray, model.input_height) for gray in grays]
    scores: list[np.ndarray | None] = [None] * len(grays)
    for batch in pixel_budget_batches([g.size for g in grays], batch_pixels, range(len(grays))):
        images, _ = ragged_batch([grays[i] for i in batch], [[] for _ in batch])
        for index, example_scores in zip(batch, model(images, training=False)):
            scores[index] = example_scores.numpy()
    return scores


def confidence(scores: np.ndarray) -> float:
    """Best-path probability per column, geometric mean over the columns (in (0, 1])."""
    from tfnhr.decoding import log_softmax

    if len(scores) == 0:
        return 1.0
    return float(np.exp(log_softmax(scores).max(axis=-1).mean()))


@dataclasses.dataclass
class EvaluationRow:
    """One decoder's result: error rates (ratios) and decoding time (seconds, scores excluded)."""

    decoder: str
    cer: float
    wer: float
    seconds: float


def evaluate(scores: Sequence[np.ndarray], references: Sequence[str],
             decoders: dict[str, Decoder]) -> tuple[list[EvaluationRow], dict[str, list[str]]]:
    """CER/WER of each decoder on the same scores; also returns each decoder's transcriptions."""
    rows, transcriptions = [], {}
    for name, decode in decoders.items():
        started = time.perf_counter()
        hypotheses = decode(scores)
        rows.append(EvaluationRow(name, error_rate(references, hypotheses, "char"),
                                  error_rate(references, hypotheses, "word"), time.perf_counter() - started))
        transcriptions[name] = hypotheses
    return rows, transcriptions


def format_table(rows: Sequence[EvaluationRow]) -> str:
    """The rows as an aligned text table (CER/WER in %)."""
    width = max([len("decoder"), *(len(row.decoder) for row in rows)])
    lines = [f"{'decoder':<{width}}  {'CER':>7}  {'WER':>7}  {'seconds':>8}"]
    lines += [f"{row.decoder:<{width}}  {row.cer:7.2%}  {row.wer:7.2%}  {row.seconds:8.1f}" for row in rows]
    return "\n".join(lines)
