"""Inference helpers (:mod:`tfnhr.inference`): a transcription's confidence is the geometric mean
of its best column probabilities. (``Transcriber.scores`` is checked against the model itself in
``tests/tfnhr/training/test_callbacks.py``, with the validation error rates.)"""

from __future__ import annotations

import numpy as np
import pytest

from tfnhr.inference import confidence


def test_confidence_is_geometric_mean_of_best_column_probabilities():
    rng = np.random.default_rng(5)
    for columns in (1, 3, 9):
        scores = rng.normal(scale=2.0, size=(columns, 6))
        probabilities = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
        expected = np.prod(probabilities.max(axis=1)) ** (1.0 / columns)
        assert confidence(scores) == pytest.approx(expected, rel=1e-9)
        assert confidence(scores.astype(np.float32)) == pytest.approx(expected, rel=1e-5)
    assert confidence(np.zeros((4, 5))) == pytest.approx(1 / 5)
    assert confidence(np.array([[0.0, 1000.0]])) == pytest.approx(1.0)
    assert confidence(np.zeros((0, 5))) == 1.0
