"""Evaluation (:mod:`tfnhr.evaluation.tables`): error rates of several decoders over the same scores,
and the printed table."""

from __future__ import annotations

import numpy as np
import pytest

from tfnhr.charset import Charset
from tfnhr.decoding import GreedyDecoder
from tfnhr.evaluation.tables import EvaluationRow, evaluate, format_table


def test_evaluate_with_two_decoders_and_format_table():
    charset = Charset("ab ")
    # Columns as one-hot-ish logits of class sequences (1 = a, 2 = b, 3 = " ", 0 = blank).
    def logits(classes):
        return np.eye(charset.num_classes)[classes] * 10.0

    scores = [logits([1, 1, 0, 2]), logits([2, 3, 1]), logits([0, 0])]
    references = ["ab", "b a", "a"]
    class Silent:
        def decode_batch(self, scores_list):
            return [""] * len(scores_list)

    decoders = {"greedy": GreedyDecoder(charset), "silent": Silent()}
    rows, transcriptions = evaluate(scores, references, decoders)
    assert transcriptions == {"greedy": ["ab", "b a", ""], "silent": ["", "", ""]}
    assert [row.decoder for row in rows] == ["greedy", "silent"]
    assert rows[0].cer == pytest.approx(1 / 6) and rows[0].wer == pytest.approx(1 / 4)
    assert rows[1].cer == pytest.approx(1.0) and rows[1].wer == pytest.approx(1.0)
    assert all(row.seconds >= 0 for row in rows)

    table = format_table([EvaluationRow("greedy", 1 / 6, 0.25, 0.04),
                          EvaluationRow("beam+lm", 0.0123, 1.5, 12.345)])
    assert table.splitlines() == [
        "decoder      CER      WER   seconds",
        "greedy    16.67%   25.00%       0.0",
        "beam+lm    1.23%  150.00%      12.3",
    ]
