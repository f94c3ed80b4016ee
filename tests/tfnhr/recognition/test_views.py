"""The width ensemble (:mod:`tfnhr.recognition.views`): CTC likelihoods against a brute-force sum
over every alignment, the choice of the agreed text (with a decoder's LM scores too), shearing against each row's closed-form
shift, and the ensemble through :class:`~tfnhr.recognition.transcriber.Transcriber` against the model run in
each view by hand."""

from __future__ import annotations

import argparse
import itertools
import math

import numpy as np
import pytest

from tfnhr.recognition import transcriber as inference, views as width_ensemble
from tfnhr.charset import Charset
from tfnhr.recognition.alignment import align
from tfnhr.commands.common import shear_factors, width_factors
from tfnhr.decoding import BeamSearchDecoder, GreedyDecoder, greedy_decode
from tfnhr.lm import build_arpa
from tfnhr.recognition.transcriber import Transcriber
from tfnhr.models import build_recognizer
from tfnhr.recognition.views import (View, agreed_readings, best_candidate, check_shears, check_widths, ctc_log_likelihoods,
                                     decode_views, scale_width, shear_image, views)
from tests.helpers.tiny_models import tiny_recognizer

CHARSET = Charset("ab")


def brute_force_log_likelihood(scores: np.ndarray, text: str) -> float:
    """log of the summed probability of every column path that collapses to ``text``."""
    probabilities = np.exp(scores - np.logaddexp.reduce(scores, axis=1, keepdims=True))
    target = CHARSET.encode(text)
    total = 0.0
    for path in itertools.product(range(scores.shape[1]), repeat=len(scores)):
        collapsed = [label for k, label in enumerate(path) if label != 0 and (k == 0 or path[k - 1] != label)]
        if collapsed == target:
            total += float(np.prod(probabilities[np.arange(len(scores)), path]))
    return float(np.log(total)) if total > 0 else -np.inf


def test_ctc_log_likelihoods_match_the_sum_over_all_alignments(monkeypatch):
    rng = np.random.default_rng(3)
    scores = [rng.normal(scale=1.5, size=(columns, CHARSET.num_classes)).astype(np.float32) for columns in (5, 3, 4, 2, 1, 5)]
    texts = ["ab", "aa", "", "aba", "a", "bab"]
    got = ctc_log_likelihoods(scores, texts, CHARSET)
    expected = [brute_force_log_likelihood(s.astype(np.float64), t) for s, t in zip(scores, texts)]
    assert got == pytest.approx(expected, rel=1e-5, abs=1e-5)
    # Scored a few at a time when their padded probabilities would be large: the same values.
    monkeypatch.setattr(width_ensemble, "CHUNK_CELLS", 2 * 5 * CHARSET.num_classes)
    assert ctc_log_likelihoods(scores, texts, CHARSET) == pytest.approx(got, rel=1e-6)
    # More characters than columns cannot align; "aa" needs a blank between the two a's.
    assert ctc_log_likelihoods([scores[1], scores[3]], ["abab", "aa"], CHARSET).tolist() == [-np.inf, -np.inf]


def mixture_log_likelihood(log_likelihoods: list[float]) -> float:
    """log of the summed probability over the views, in plain Python (-inf if no view aligns)."""
    total = sum(math.exp(value) for value in log_likelihoods if value != -math.inf)
    return math.log(total) if total > 0 else -math.inf


def test_best_candidate_is_the_most_likely_under_a_mixture_of_the_views():
    # One view reads candidate 0 well, the other finds it unlikely; both find candidate 1 middling.
    # The mixture keeps 0 (p = e^-0.1 + e^-10 against 2 e^-2); the product of the views (summed
    # log-likelihoods, -10.1 against -4) would keep 1.
    disagreeing = np.array([[-0.1, -2.0], [-10.0, -2.0]])
    assert best_candidate(disagreeing) == 0 and int(np.argmax(disagreeing.sum(axis=0))) == 1
    # A view that cannot align a candidate gives it probability 0, not a veto.
    assert best_candidate(np.array([[-1.0, -2.0], [-np.inf, -3.0]])) == 0
    assert best_candidate(np.array([[-np.inf, -2.0], [-np.inf, -3.0]])) == 1
    assert best_candidate(np.full((2, 3), -np.inf)) == 0
    rng = np.random.default_rng(5)
    for _ in range(200):
        table = rng.normal(-20.0, 8.0, size=(int(rng.integers(1, 6)), int(rng.integers(1, 5))))
        table[rng.random(table.shape) < 0.2] = -np.inf
        mixtures = [mixture_log_likelihood(list(column)) for column in table.T]
        assert mixtures[best_candidate(table)] >= max(mixtures) - 1e-9
    # Ties: the first of them.
    assert best_candidate(np.array([[-2.0, -1.0, -1.0], [-np.inf, -3.0, -3.0]])) == 1


def test_agreed_readings_keep_the_most_likely_candidate_and_its_best_reader():
    rng = np.random.default_rng(8)
    width_scores = [[rng.normal(scale=2.0, size=(columns, CHARSET.num_classes)) for columns in (4, 5, 3)] for _ in range(3)]
    width_texts = [[greedy_decode(scores, CHARSET) for scores in per_image] for per_image in width_scores]
    texts, readers = agreed_readings(width_scores, width_texts, CHARSET)
    for image in range(3):
        candidates = {width_texts[w][image] for w in range(3)}
        mixed = {text: mixture_log_likelihood([brute_force_log_likelihood(width_scores[w][image], text)
                                               for w in range(3)]) for text in candidates}
        assert mixed[texts[image]] == pytest.approx(max(mixed.values()))
        assert width_texts[readers[image]][image] == texts[image]
        own = [brute_force_log_likelihood(width_scores[w][image], texts[image])
               for w in range(3) if width_texts[w][image] == texts[image]]
        assert brute_force_log_likelihood(width_scores[readers[image]][image], texts[image]) == pytest.approx(max(own))


def test_agreed_readings_add_the_decoders_reading_scores():
    rng = np.random.default_rng(9)
    view_scores = [[rng.normal(scale=2.0, size=(columns, CHARSET.num_classes)) for columns in (4, 5, 3)] for _ in range(3)]
    view_texts = [[greedy_decode(scores, CHARSET) for scores in per_image] for per_image in view_scores]
    offsets = {text: float(rng.normal(scale=3.0)) for texts in view_texts for text in texts}
    texts, _ = agreed_readings(view_scores, view_texts, CHARSET, lambda batch: np.array([offsets[t] for t in batch]))
    for image in range(3):
        candidates = {view_texts[v][image] for v in range(3)}
        weighed = {text: offsets[text] + mixture_log_likelihood([brute_force_log_likelihood(view_scores[v][image], text)
                                                                 for v in range(3)]) for text in candidates}
        assert weighed[texts[image]] == pytest.approx(max(weighed.values()))


def test_views_are_weighed_with_the_decoders_language_model(tmp_path):
    """One view reads "brwn fox" cleanly, the other "brown fox" with a faint "o": the views'
    likelihoods alone keep "brwn fox"; with the LM that the beam search used, "brown fox"."""
    from tests.tfnhr.decoding.test_decoding import LETTERS, written

    lm = tmp_path / "fox.arpa"
    build_arpa(["the brown fox", "a brown dog", "the fox sleeps"] * 3, order=3, out_path=lm)
    view_scores = [[written("brwn fox")], [written("brown fox", weak={2: 0.6})]]
    plain = decode_views(BeamSearchDecoder(LETTERS), view_scores, LETTERS)[0]
    with_lm, readers = decode_views(BeamSearchDecoder(LETTERS, lm_path=lm), view_scores, LETTERS)
    assert plain == ["brwn fox"] and decode_views(GreedyDecoder(LETTERS), view_scores, LETTERS)[0] == plain
    assert with_lm == ["brown fox"] and readers == [1]


def test_one_width_is_plain_reading_and_several_agree_with_the_model_run_by_hand(monkeypatch):
    charset = Charset("abcdefghij ")
    model = build_recognizer(charset, mdlstm_units=(2, 4, 8), conv_filters=(4, 6), block=(2, 2), dropout=0.0,
                             input_height=16)
    rng = np.random.default_rng(0)
    grays = [rng.integers(0, 256, size=(16, width), dtype=np.uint8) for width in (40, 64, 23)]
    plain = Transcriber(model)
    assert Transcriber(model, widths=(1.0,)).transcribe(grays) == plain.transcribe(grays)
    widths = (0.8, 1.0, 1.25)
    ensemble = Transcriber(model, widths=widths)
    width_scores = [plain.scores([scale_width(gray, width) for gray in grays]) for width in widths]
    assert [scores.shape[0] for scores in width_scores[0]] == [8, 13, 5]  # 0.8 x (40, 64, 23) px / 4 px per column
    width_texts = [[greedy_decode(scores, charset) for scores in per_width] for per_width in width_scores]
    expected, _ = agreed_readings(width_scores, width_texts, charset)
    assert ensemble.transcribe(grays) == expected
    monkeypatch.setattr(inference, "ENSEMBLE_IMAGES", 2)  # the images in parts: the same texts
    assert ensemble.transcribe(grays) == expected
    # One factor other than 1: read at that width.
    assert Transcriber(model, widths=(0.8,)).transcribe(grays) == width_texts[0]
    for gray, reading in zip(grays, ensemble.read(grays)):
        assert reading.alignment is not None and 0 < reading.confidence <= 1
        assert all(0 <= span.x0 < span.x1 <= gray.shape[1] + 1e-9 for span in reading.alignment.chars)


def test_views_with_shears_agree_with_the_model_run_by_hand():
    model = tiny_recognizer()
    charset = model.charset
    rng = np.random.default_rng(1)
    grays = [rng.integers(0, 256, size=(height, width), dtype=np.uint8) for height, width in ((24, 60), (16, 44))]
    plain = Transcriber(model)
    every = views((0.8, 1.0), (-0.2, 0.0, 0.2))
    view_scores = [plain.scores([view.image(gray) for gray in grays]) for view in every]
    view_texts = [[greedy_decode(scores, charset) for scores in per_view] for per_view in view_scores]
    expected, _ = agreed_readings(view_scores, view_texts, charset)
    assert Transcriber(model, widths=(0.8, 1.0), shears=(-0.2, 0.0, 0.2)).transcribe(grays) == expected


def test_a_sheared_readers_spans_are_in_the_columns_of_the_image_as_given():
    """One sheared view: its columns span the image widened by the shear's margins (computed from
    the image's own height, not the model's input height); the margins are removed from the spans."""
    model = tiny_recognizer()
    rng = np.random.default_rng(1)
    grays = [rng.integers(0, 256, size=(height, width), dtype=np.uint8) for height, width in ((24, 60), (16, 44))]
    margins = [3, 2]  # ceil(0.2 x (24 - 1) / 2), ceil(0.2 x (16 - 1) / 2)
    sheared = [Transcriber(model).scores([shear_image(gray, 0.2)])[0] for gray in grays]
    shifted = 0
    for gray, margin, scores, reading in zip(grays, margins, sheared, Transcriber(model, shears=(0.2,)).read(grays)):
        widened = align(scores, model.charset, gray.shape[1] + 2 * margin)
        assert reading.text == widened.text and reading.alignment is not None and reading.alignment.chars
        for span, wide in zip(reading.alignment.chars, widened.chars, strict=True):
            assert span.x0 == pytest.approx(min(max(wide.x0 - margin, 0), gray.shape[1]))
            assert span.x1 == pytest.approx(min(max(wide.x1 - margin, 0), gray.shape[1]))
            shifted += 0 < wide.x0 - margin
    assert shifted  # a span that moved, not only ones clipped to the edges


def test_shear_image_moves_each_row_by_its_shear_about_the_middle_row():
    height, width, column = 21, 30, 12
    gray = np.full((height, width), 255, np.uint8)
    gray[:, column] = 0  # a vertical stroke, 1 px wide
    assert shear_image(gray, 0.0) is gray
    for shear in (0.2, -0.35):
        margin = int(np.ceil(abs(shear) * (height - 1) / 2))
        out = shear_image(gray, shear)
        assert out.shape == (height, width + 2 * margin)
        ink = 255.0 - out
        assert ink.sum(axis=1) == pytest.approx(np.full(height, 255.0), abs=2)  # no ink lost, paper-coloured corners
        centres = (ink * np.arange(out.shape[1])).sum(axis=1) / ink.sum(axis=1)
        expected = column + margin + shear * (np.arange(height) - (height - 1) / 2)
        assert centres == pytest.approx(expected, abs=0.05)
    assert View(1.0, 0.2).margin(height) == 2 and View(1.2, 0.2).image(gray).shape == (height, round(34 * 1.2))


def test_views_are_every_shear_at_every_width():
    assert views((0.8, 1.0), (-0.2, 0.2)) == (View(0.8, -0.2), View(1.0, -0.2), View(0.8, 0.2), View(1.0, 0.2))
    assert views() == (View(1.0, 0.0),)
    assert check_shears([0, -0.1]) == (0.0, -0.1)
    for bad in ([], [0.1, 0.1], [1.5]):
        with pytest.raises(ValueError):
            check_shears(bad)
    assert shear_factors("default") == (-0.2, 0.0, 0.2) and shear_factors("-0.1,0") == (-0.1, 0.0)
    for bad in ("2", "0,0", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            shear_factors(bad)


def test_scale_width_keeps_the_height():
    gray = np.arange(6 * 10, dtype=np.uint8).reshape(6, 10)
    assert scale_width(gray, 1.0) is gray
    assert scale_width(gray, 1.26).shape == (6, 13) and scale_width(gray, 0.74).shape == (6, 7)
    assert scale_width(gray[:, :1], 0.2).shape == (6, 1)


def test_width_factors_are_checked():
    assert width_factors("default") == (0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4)
    assert width_factors("1,1.2") == (1.0, 1.2)
    for bad in ("0", "1,1", "x", "1,,2", "20"):
        with pytest.raises(argparse.ArgumentTypeError):
            width_factors(bad)
    assert check_widths([1, 1.5]) == (1.0, 1.5)
    for bad in ([], [1.0, 1.0], [0.0]):
        with pytest.raises(ValueError):
            check_widths(bad)
