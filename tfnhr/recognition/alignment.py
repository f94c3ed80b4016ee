"""Where the recognized characters and words are: spans in the line image's pixel columns, and a
confidence per word, from the CTC best path.

The best path takes the top class of every output column; a character is a run of columns with
the same non-blank class. Its span starts where the blank gap before it is half crossed and ends
where the gap after it is half crossed (columns of the line's first and last character reach the
image's edges only by half their neighbouring gap's mean), so spans tile the characters as a
reader would draw boxes. A word is a run of characters between spaces; its span runs from its
first character's start to its last character's end. Column ``c`` covers pixels ``[c·W/T,
(c+1)·W/T)`` of an image ``W`` px wide with ``T`` output columns.

Confidences are geometric means of the best path's per-column probabilities over the span's
columns. Spans exist for the best-path text only: a decoder with a language model may output
another text, for which :func:`align` gives none.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfnhr.charset import BLANK_INDEX, Charset
from tfnhr.decoding.greedy import check_scores, log_softmax


@dataclasses.dataclass(frozen=True)
class Span:
    """A character or word: ``text``, ``confidence`` in (0, 1], and ``x0 < x1``, its columns in
    image pixels (floats, ``0 <= x0 < x1 <= W``; ``x0 == x1`` only where a sheared view's reading
    put the span wholly into the margin the shear added, :meth:`shifted`)."""

    text: str
    confidence: float
    x0: float
    x1: float

    def to_json(self) -> dict:
        return {"text": self.text, "confidence": round(self.confidence, 4), "x0": round(self.x0, 1),
                "x1": round(self.x1, 1)}

    def scaled(self, factor: float) -> "Span":
        """The span with its columns multiplied by ``factor`` (for the same image at another width)."""
        return dataclasses.replace(self, x0=self.x0 * factor, x1=self.x1 * factor)

    def shifted(self, offset: float, width: float) -> "Span":
        """The span moved by ``offset`` px and clipped to ``[0, width]`` (for the image inside a
        wider one, e.g. a sheared view's margins removed)."""
        return dataclasses.replace(self, x0=min(max(self.x0 + offset, 0.0), width),
                                   x1=min(max(self.x1 + offset, 0.0), width))


@dataclasses.dataclass(frozen=True)
class Alignment:
    """The best path of one line: its ``text``, ``chars`` (spaces included) and ``words``."""

    text: str
    chars: tuple[Span, ...]
    words: tuple[Span, ...]

    def scaled(self, factor: float) -> "Alignment":
        """The alignment for the same image scaled to ``factor`` times its width."""
        return Alignment(self.text, tuple(span.scaled(factor) for span in self.chars),
                         tuple(span.scaled(factor) for span in self.words))

    def shifted(self, offset: float, width: float) -> "Alignment":
        """The alignment with every span moved by ``offset`` px and clipped to ``[0, width]``."""
        return Alignment(self.text, tuple(span.shifted(offset, width) for span in self.chars),
                         tuple(span.shifted(offset, width) for span in self.words))


def align(scores: np.ndarray, charset: Charset, image_width: float) -> Alignment:
    """The best-path alignment of column scores ``[T, C]`` (logits) of an image ``image_width``
    px wide (see the module docstring)."""
    scores = check_scores(scores, charset)
    columns = len(scores)
    if columns == 0:
        return Alignment("", (), ())
    log_probs = log_softmax(scores.astype(np.float64))
    best = log_probs.argmax(axis=1)
    best_log = log_probs[np.arange(columns), best]
    runs = _runs(best)
    if not runs:
        return Alignment("", (), ())
    bounds = _run_bounds(runs, columns)
    pixel = image_width / columns
    chars = tuple(Span(charset.decode([label]), _mean_prob(best_log, start, end), start * pixel, end * pixel)
                  for (label, _, _), (start, end) in zip(runs, bounds))
    words = []
    for first, last in _word_runs(chars):
        start, end = bounds[first][0], bounds[last][1]
        words.append(Span("".join(char.text for char in chars[first:last + 1]),
                          _mean_prob(best_log, start, end), start * pixel, end * pixel))
    return Alignment("".join(char.text for char in chars), chars, tuple(words))


def _runs(best: np.ndarray) -> list[tuple[int, int, int]]:
    """``(label, first column, end column)`` of each run of one non-blank class."""
    runs, start = [], 0
    for column in range(1, len(best) + 1):
        if column == len(best) or best[column] != best[start]:
            if best[start] != BLANK_INDEX:
                runs.append((int(best[start]), start, column))
            start = column
    return runs


def _run_bounds(runs: list[tuple[int, int, int]], columns: int) -> list[tuple[float, float]]:
    """Each run widened to the middle of the blank gaps beside it (at the line's ends: by half the
    mean gap, within ``[0, columns]``), in fractional columns."""
    gaps = [runs[i + 1][1] - runs[i][2] for i in range(len(runs) - 1)]
    edge = float(np.mean(gaps)) / 2 if gaps else 0.0
    bounds = []
    for index, (_, start, end) in enumerate(runs):
        left = start - (gaps[index - 1] / 2 if index > 0 else min(edge, start))
        right = end + (gaps[index] / 2 if index < len(gaps) else min(edge, columns - end))
        bounds.append((left, right))
    return bounds


def _word_runs(chars: tuple[Span, ...]) -> list[tuple[int, int]]:
    """``(first, last)`` char indices of each word (maximal runs of non-space characters)."""
    words, first = [], None
    for index, char in enumerate(chars):
        if char.text.isspace():
            if first is not None:
                words.append((first, index - 1))
            first = None
        elif first is None:
            first = index
    if first is not None:
        words.append((first, len(chars) - 1))
    return words


def _mean_prob(best_log: np.ndarray, start: float, end: float) -> float:
    """Geometric mean of the best path's probabilities over the columns that ``[start, end)``
    touches (at least one)."""
    first = int(np.floor(start))
    last = max(first + 1, int(np.ceil(end)))
    return float(np.exp(best_log[first:last].mean()))


@dataclasses.dataclass(frozen=True)
class Reading:
    """One image's recognition: ``text``, ``confidence`` in (0, 1] (best-path probability per
    column, geometric mean) and the best path's ``alignment``, ``None`` when the decoder's text is
    not the best path's (a language model changed it)."""

    text: str
    confidence: float
    alignment: Alignment | None = None

    def spans_json(self) -> dict:
        """``{"words": [...], "chars": [...]}`` (each span's ``text``, ``confidence``, ``x0``, ``x1``)
        when the reading has an alignment, else ``{}``: what ``recognize --format json`` and the
        service add to a result."""
        if self.alignment is None:
            return {}
        return {"words": [span.to_json() for span in self.alignment.words],
                "chars": [span.to_json() for span in self.alignment.chars]}

    def scaled(self, factor: float) -> "Reading":
        """The reading with its spans for the same image scaled to ``factor`` times its width."""
        return dataclasses.replace(self, alignment=None if self.alignment is None else self.alignment.scaled(factor))
