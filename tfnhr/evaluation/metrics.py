"""Recognition error rates by edit distance.

Character error rate (CER) = total Levenshtein distance between hypothesis and reference
characters / total reference characters; word error rate (WER) the same over whitespace-split
words. Both are ratios (0 = perfect; can exceed 1 when hypotheses are much longer).

Normalisation (:func:`normalize_text`, applied to references and hypotheses alike before
scoring): Unicode NFC, leading/trailing whitespace removed, every run of whitespace made one
space. Case and punctuation are kept: they are part of what a recognizer must get right.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Hashable, Sequence

from rapidfuzz.distance import Levenshtein

_WHITESPACE = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """NFC, stripped, whitespace runs collapsed to one space (see the module docstring)."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFC", text)).strip()


def edit_distance(reference: Sequence[Hashable], hypothesis: Sequence[Hashable]) -> int:
    """Levenshtein distance (insertions, deletions, substitutions all cost 1) of two strings or
    two sequences of hashable items (e.g. words), by ``rapidfuzz``."""
    return Levenshtein.distance(reference, hypothesis)


def error_counts(reference: str, hypothesis: str) -> list[int]:
    """``[character errors, reference characters, word errors, reference words]`` of one text,
    normalised by :func:`normalize_text`; summed over texts they give :func:`error_rate`."""
    reference, hypothesis = normalize_text(reference), normalize_text(hypothesis)
    return [edit_distance(reference, hypothesis), len(reference),
            edit_distance(reference.split(), hypothesis.split()), len(reference.split())]


def reference_sizes(references: Sequence[str]) -> tuple[int, int]:
    """``(characters, words)`` of ``references`` as :func:`error_counts` counts them: the
    denominators of their CER and WER."""
    normalized = [normalize_text(reference) for reference in references]
    return sum(map(len, normalized)), sum(len(text.split()) for text in normalized)


def summed_error_counts(references: Sequence[str], hypotheses: Sequence[str]) -> list[int]:
    """:func:`error_counts` summed over aligned ``references`` and ``hypotheses``."""
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    totals = [0, 0, 0, 0]
    for reference, hypothesis in zip(references, hypotheses):
        totals = [a + b for a, b in zip(totals, error_counts(reference, hypothesis))]
    return totals


def rates_of_counts(counts: Sequence[float]) -> tuple[float, float]:
    """``(CER, WER)`` of :func:`summed_error_counts`' four totals (summed over ranks, say)."""
    if counts[1] == 0 or counts[3] == 0:
        raise ValueError("the references contain no characters/words to score against")
    return counts[0] / counts[1], counts[2] / counts[3]


def error_rate(references: Sequence[str], hypotheses: Sequence[str], unit: str = "char") -> float:
    """CER (``unit="char"``) or WER (``unit="word"``) of ``hypotheses`` against ``references``."""
    if unit not in ("char", "word"):
        raise ValueError(f"unit must be 'char' or 'word', got {unit!r}")
    cer, wer = rates_of_counts(summed_error_counts(references, hypotheses))
    return cer if unit == "char" else wer
