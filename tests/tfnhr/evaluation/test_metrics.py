"""Text metrics (:mod:`tfnhr.evaluation.metrics`): edit distance against TensorFlow's, character and word
error rates in closed form, text normalisation (NFC, whitespace), and per-line error counts that
sum to the error rates."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from tfnhr.evaluation.metrics import edit_distance, error_counts, error_rate, normalize_text, reference_sizes


def tf_edit_distance(reference: str, hypothesis: str) -> int:
    """TensorFlow's own (unnormalised) Levenshtein distance as the independent reference."""
    def sparse(text: str) -> tf.SparseTensor:
        indices = np.array([[0, i] for i in range(len(text))], dtype=np.int64).reshape(-1, 2)
        return tf.SparseTensor(indices, np.array([ord(c) for c in text], dtype=np.int64), [1, max(len(text), 1)])
    return int(tf.edit_distance(sparse(hypothesis), sparse(reference), normalize=False).numpy()[0])


@pytest.mark.parametrize("reference, hypothesis", [
    ("kitten", "sitting"), ("flaw", "lawn"), ("abc", "abc"), ("abc", ""), ("", "xy"), ("12345", "54321")])
def test_edit_distance_matches_tensorflow(reference, hypothesis):
    assert edit_distance(reference, hypothesis) == tf_edit_distance(reference, hypothesis)


def test_edit_distance_random_strings_match_tensorflow():
    rng = np.random.default_rng(3)
    for _ in range(40):
        a, b = ("".join(rng.choice(list("ab c"), size=rng.integers(0, 9))) for _ in range(2))
        assert edit_distance(a, b) == tf_edit_distance(a, b)


def test_error_rates_closed_form():
    assert error_rate(["hello world"], ["hello world"]) == 0.0
    assert error_rate(["abcd", "ef"], ["abxd", "e"]) == pytest.approx(2 / 6)
    assert error_rate(["the cat sat", "a dog"], ["the bat sat", "a dog ran"], unit="word") == pytest.approx(2 / 5)
    with pytest.raises(ValueError, match="references"):
        error_rate(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="no characters"):
        error_rate([""], ["x"])


# ----------------------------------------------------------------- normalisation

def test_normalize_text_nfc_and_whitespace():
    assert normalize_text("  a\t b\n\n c  ") == "a b c"
    assert normalize_text("cafe\u0301") == "caf\u00e9" == unicodedata.normalize("NFC", "cafe\u0301")
    assert normalize_text("\u00a0x\u2003y\u3000") == "x y"  # Unicode spaces too
    assert normalize_text("") == "" and normalize_text(" \n ") == ""
    assert normalize_text("Ab,c") == "Ab,c"  # case and punctuation kept


def test_error_rates_with_whitespace_and_normal_forms():
    nfc, nfd = "na\u00efve", "nai\u0308ve"
    assert len(nfc) == 5 and len(nfd) == 6
    assert error_rate([nfc], [nfd]) == 0.0 and error_rate([nfd], [nfc], "word") == 0.0
    assert error_rate([nfd], ["naive"]) == pytest.approx(1 / 5)  # one substitution of 5 characters
    assert error_rate(["  the   cat "], ["the cat"]) == 0.0
    assert error_rate(["the cat"], ["the\tcat\n"], "word") == 0.0
    # "ab  cd" -> "ab cd" (5 characters, 2 words); "abcd": 1 deletion, 1 substitution + 1 deletion
    assert error_rate(["ab  cd"], ["abcd"]) == pytest.approx(1 / 5)
    assert error_rate(["ab  cd"], ["abcd"], "word") == pytest.approx(2 / 2)
    # Two lines: 1 + 0 character edits over 3 + 4 characters; words 1 + 0 over 1 + 2.
    assert error_rate(["abc", "x  yz"], ["abd", "x yz"]) == pytest.approx(1 / 7)
    assert error_rate(["abc", "x  yz"], ["abd", "x yz"], "word") == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="unit"):
        error_rate(["a"], ["a"], "line")
    with pytest.raises(ValueError, match="no characters"):
        error_rate([" \t "], ["a"])


# ----------------------------------------------------------------- error counts (summed over workers)

def test_error_counts_sum_to_the_error_rates():
    references, hypotheses = ["the  cat sat", "a dog", "Zebra"], ["the cat sit", "a dgo bark", ""]
    counts = np.sum([error_counts(r, h) for r, h in zip(references, hypotheses)], axis=0)
    assert counts[0] / counts[1] == error_rate(references, hypotheses, "char")
    assert counts[2] / counts[3] == error_rate(references, hypotheses, "word")


def test_reference_sizes_are_the_rates_denominators():
    references = ["the  cat sat", " a dog ", "Zebra", ""]
    chars, words = reference_sizes(references)
    # Counted by hand after normalisation (runs of spaces -> one, ends stripped): 11 + 5 + 5 + 0, 3 + 2 + 1.
    assert (chars, words) == (21, 6)
    counts = np.sum([error_counts(r, "x") for r in references], axis=0)
    assert (counts[1], counts[3]) == (chars, words)
