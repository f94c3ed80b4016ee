"""CER/WER tables: several decoders compared on the same column scores (``tfnhr evaluate``, the
main job, notebooks). The scores come from :class:`tfnhr.recognition.transcriber.Transcriber`."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from tfnhr.charset import Charset
from tfnhr.config.choices import DEFAULT_BATCH_PIXELS
from tfnhr.data.samples import TextImageSet
from tfnhr.decoding import Decoder
from tfnhr.recognition.transcriber import Transcriber
from tfnhr.evaluation.metrics import rates_of_counts, summed_error_counts
from tfnhr.models.ctc_model import CtcModel
from tfnhr.recognition.views import decode_views


@dataclasses.dataclass
class EvaluationRow:
    """One decoder's result: error rates (ratios) and decoding time (seconds, scores excluded)."""

    decoder: str
    cer: float
    wer: float
    seconds: float


def evaluate(scores: Sequence[np.ndarray], references: Sequence[str],
             decoders: Mapping[str, Decoder]) -> tuple[list[EvaluationRow], dict[str, list[str]]]:
    """CER/WER of each decoder on the same scores; also returns each decoder's transcriptions."""
    return evaluate_in_parts([[scores]], references, decoders)


def evaluate_in_parts(parts: Iterable[Sequence[Sequence[np.ndarray]]], references: Sequence[str],
                      decoders: Mapping[str, Decoder], charset: Charset | None = None
                      ) -> tuple[list[EvaluationRow], dict[str, list[str]]]:
    """:func:`evaluate` of scores that come in consecutive parts of the images, each part per
    view of a width ensemble per image ``[T, C]`` (one view: read once); each decoder's texts
    are those the views agree on (:func:`tfnhr.recognition.views.decode_views`; ``charset`` needed
    with more than one view). Decoding seconds are summed over the parts."""
    transcriptions: dict[str, list[str]] = {name: [] for name in decoders}
    seconds = dict.fromkeys(decoders, 0.0)
    for view_scores in parts:
        for name, decoder in decoders.items():
            started = time.perf_counter()
            transcriptions[name] += decode_views(decoder, view_scores, charset)[0]
            seconds[name] += time.perf_counter() - started
    rows = [EvaluationRow(name, *rates_of_counts(summed_error_counts(references, hypotheses)), seconds[name])
            for name, hypotheses in transcriptions.items()]
    return rows, transcriptions


def format_table(rows: Sequence[EvaluationRow]) -> str:
    """The rows as an aligned text table (CER/WER in %)."""
    width = max([len("decoder"), *(len(row.decoder) for row in rows)])
    lines = [f"{'decoder':<{width}}  {'CER':>7}  {'WER':>7}  {'seconds':>8}"]
    lines += [f"{row.decoder:<{width}}  {row.cer:7.2%}  {row.wer:7.2%}  {row.seconds:8.1f}" for row in rows]
    return "\n".join(lines)


def evaluate_set(model: CtcModel, data: TextImageSet, decoders: Mapping[str, Decoder],
                 batch_pixels: int = DEFAULT_BATCH_PIXELS, widths: Sequence[float] = (1.0,),
                 shears: Sequence[float] = (0.0,)) -> tuple[list[EvaluationRow], dict[str, list[str]]]:
    """:func:`evaluate` of the decoders on ``model``'s scores of ``data``'s images against its
    texts; with several ``widths`` (factors of the image widths) or ``shears`` through the width
    ensemble."""
    parts = Transcriber(model, batch_pixels=batch_pixels, widths=widths, shears=shears).view_score_parts(data.images)
    return evaluate_in_parts(parts, data.texts, decoders, model.charset)
