"""A CTC-like column model of a rendered line for alignment tests: each character a one-column peak
at its share of its word's box, a space peak in the middle of each gap between words."""

from __future__ import annotations

import math

import numpy as np

from tfnhr.charset import Charset


def peak_labels(text: str, boxes, width: int, charset: Charset, pixels_per_column: int) -> list[int]:
    """The best-path class of each output column (0: blank) of a line ``width`` px wide whose
    words have the ``(x0, y0, x1, y1)`` ``boxes``, one column per ``pixels_per_column`` px."""
    columns = math.ceil(width / pixels_per_column)
    labels = [0] * columns
    words = text.split()
    for number, (word, (x0, _, x1, _)) in enumerate(zip(words, boxes)):
        for k, char in enumerate(word):
            centre = x0 + (k + 0.5) * (x1 - x0) / len(word)
            labels[min(columns - 1, int(centre / pixels_per_column))] = charset.encode(char)[0]
        if number + 1 < len(words):
            labels[int((x1 + boxes[number + 1][0]) / 2 / pixels_per_column)] = charset.encode(" ")[0]
    return labels


def peak_scores(labels: list[int], classes: int, probabilities: list[float]) -> np.ndarray:
    """Logits ``[T, classes]`` whose softmax puts ``probabilities[t]`` on ``labels[t]`` and
    spreads the rest evenly."""
    scores = np.zeros((len(labels), classes))
    for column, (label, p) in enumerate(zip(labels, probabilities)):
        rest = (1 - p) / (classes - 1)
        scores[column] = np.log(rest)
        scores[column, label] = np.log(p)
    return scores


def interval_iou(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Intersection over union of the intervals ``a`` and ``b`` (``(start, end)``, ``start < end``)."""
    overlap = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    return overlap / (max(a[1], b[1]) - min(a[0], b[0]))
