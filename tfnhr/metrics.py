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

_WHITESPACE = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """NFC, stripped, whitespace runs collapsed to one space (see the module docstring)."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFC", text)).strip()


def edit_distance(reference: Sequence[Hashable], hypothesis: Sequence[Hashable]) -> int:
    """Levenshtein distance (insertions, deletions, substitutions all cost 1)."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref_item in enumerate(reference, start=1):
        current = [i]
        for j, hyp_item in enumerate(hypothesis, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref_item != hyp_item)))
        previous = current
    return previous[-1]


def error_rate(references: Sequence[str], hypotheses: Sequence[str], unit: str = "char") -> float:
    """CER (``unit="char"``) or WER (``unit="word"``) of ``hypotheses`` against ``references``."""
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    if unit not in ("char", "word"):
        raise ValueError(f"unit must be 'char' or 'word', got {unit!r}")
    split = (lambda text: list(normalize_text(text))) if unit == "char" else (
        lambda text: normalize_text(text).split())
    errors = sum(edit_distance(split(ref), split(hyp)) for ref, hyp in zip(references, hypotheses))
    total = sum(len(split(ref)) for ref in references)
    if total == 0:
        raise ValueError("the references contain no characters/words to score against")
    return errors / total
