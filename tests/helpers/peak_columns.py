"""A CTC-like column model of a rendered line for alignment tests: each character a one-column peak
at its share of its word's box, a space peak in the middle of each gap between words."""

from __future__ import annotations

import math

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
