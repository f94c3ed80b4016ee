"""Inference helpers (:mod:`tfnhr.recognition.transcriber`): a transcription's confidence is the geometric mean
of its best column probabilities; a model trained on normalized stroke spacing reads lines
normalized so (against the model without it given normalized lines); the model runs as one graph
per model (against its eager calls, one trace for every transcriber and batch shape).
(``Transcriber.scores`` is checked against the model itself in
``tests/tfnhr/training/test_callbacks.py``, with the validation error rates.)"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from tests.helpers.tiny_models import CHARSET, tiny_recognizer
from tests.tfnhr.data.test_spacing import bars
from tfnhr.recognition.alignment import align
from tfnhr.data.dataset import ragged_batch
from tfnhr.data.images import scale_to_height, scale_width
from tfnhr.data.spacing import normalize_spacing
from tfnhr.recognition.transcriber import Transcriber, confidence, inference_graph
from tfnhr.models import Recognizer, load_recognizer


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


TARGET_SPACING = 0.3
"""A stroke spacing (fraction of the height) for models "trained on normalized lines"."""


def spacing_recognizer(target: float = TARGET_SPACING) -> Recognizer:
    """The tiny recognizer's network and weights as a model trained on lines of stroke spacing ``target``."""
    tiny = tiny_recognizer()
    model = Recognizer.from_config({**tiny.get_config(), "stroke_spacing": target})
    model.build()
    model.set_weights(tiny.get_weights())
    return model


def text_lines() -> list[np.ndarray]:
    """Gray lines of several heights and stroke spacings: bars, a bar line with noise, a blank one."""
    rng = np.random.default_rng(3)
    noisy = bars(24, 9, 5).astype(int) + rng.integers(-15, 15, (24, 52))
    return [bars(16, 10, 7), bars(32, 6, 20, core=(8, 24)), np.clip(noisy, 0, 255).astype(np.uint8),
            np.full((16, 40), 250, np.uint8)]


def test_a_model_trained_on_normalized_spacing_reads_normalized_lines():
    """The model's ``stroke_spacing`` makes the transcriber read each line at the model's height with
    its width scaled to that spacing, before any view: the same scores as the model without it
    given the normalized lines; spans come back in the columns of the lines as given."""
    spaced, plain = spacing_recognizer(), tiny_recognizer()
    grays = text_lines()
    normalized = [normalize_spacing(scale_to_height(gray, 16), TARGET_SPACING) for gray in grays]
    assert [g.shape[1] for g in normalized] != [scale_to_height(g, 16).shape[1] for g in grays]  # widths changed
    assert normalized[-1].shape == (16, 40)  # the blank line keeps its width
    for ours, theirs in zip(Transcriber(spaced).view_scores(grays)[0], Transcriber(plain).scores(normalized)):
        np.testing.assert_array_equal(ours, theirs)
    assert Transcriber(spaced).transcribe(grays) == Transcriber(plain).transcribe(normalized)
    all_scores = Transcriber(plain).scores(normalized)
    for gray, prepared, scores, reading in zip(grays, normalized, all_scores, Transcriber(spaced).read(grays)):
        expected = align(scores, CHARSET, prepared.shape[1]).scaled(gray.shape[1] / prepared.shape[1])
        assert reading.alignment == expected
    widened = Transcriber(spaced, widths=(0.8, 1.25))  # views act on the normalized line
    wide_view = Transcriber(plain).scores([scale_width(normalized[0], 1.25)])[0]
    np.testing.assert_array_equal(widened.view_scores(grays[:1])[1][0], wide_view)


def test_stroke_spacing_is_saved_with_the_model_and_checked(tmp_path):
    spacing_recognizer(0.27).save(tmp_path / "spaced.keras")
    assert load_recognizer(tmp_path / "spaced.keras").stroke_spacing == pytest.approx(0.27)
    assert tiny_recognizer().stroke_spacing is None
    with pytest.raises(ValueError, match="stroke_spacing must be positive"):
        Recognizer(CHARSET, stroke_spacing=0.0)


def test_the_model_runs_as_one_graph_that_sees_its_current_weights():
    """Every transcriber of a model runs one graph, traced once for all batch shapes, with the same
    scores as the model called eagerly on each line alone; weights assigned after the trace (as
    the weight average and the halving's restore do) are the ones it reads; the cache does not
    keep a model alive."""
    model = Recognizer.from_config(tiny_recognizer().get_config())  # its own weights: they change below
    model.build()
    model.set_weights(tiny_recognizer().get_weights())
    grays = [scale_to_height(gray, 16) for gray in text_lines()]
    graph = inference_graph(model)
    assert inference_graph(model) is graph
    for batch_pixels in (10_000, 600):  # all lines in one batch, then one per batch
        for gray, scores in zip(grays, Transcriber(model, batch_pixels=batch_pixels).scores(grays)):
            images, _ = ragged_batch([gray], [[]])
            np.testing.assert_allclose(scores, model(images, training=False)[0].numpy(), rtol=1e-5, atol=1e-5)
    assert graph.experimental_get_tracing_count() == 1
    before = Transcriber(model).scores(grays[:1])[0]
    model.set_weights([w + 0.05 for w in model.get_weights()])
    after = Transcriber(model).scores(grays[:1])[0]
    images, _ = ragged_batch(grays[:1], [[]])
    assert np.abs(after - before).max() > 1e-3
    np.testing.assert_allclose(after, model(images, training=False)[0].numpy(), rtol=1e-5, atol=1e-5)
    assert graph.experimental_get_tracing_count() == 1
    reference = weakref.ref(model)
    del model, graph
    gc.collect()
    assert reference() is None
