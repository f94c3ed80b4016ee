"""Edit-distance metrics, ragged batching and the embedded digit-string data."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfnhr.data.dataset import to_ragged_images, to_ragged_labels
from tfnhr.data.digit_strings import ALPHABET, GLYPHS, generate, render
from tfnhr.metrics import edit_distance, error_rate


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


def test_ragged_images_keep_every_pixel_in_place():
    rng = np.random.default_rng(0)
    images = [rng.random((h, w, 2), dtype=np.float32) for h, w in [(3, 5), (1, 1), (4, 2)]]
    ragged = to_ragged_images(images)
    assert ragged.shape.rank == 4
    for image, back in zip(images, ragged):
        np.testing.assert_array_equal(back.to_tensor().numpy(), image)
    labels = to_ragged_labels([[1, 2], [3], [4, 5, 6]])
    assert labels.to_list() == [[1, 2], [3], [4, 5, 6]]
    with pytest.raises(ValueError):
        to_ragged_images([np.zeros((0, 3, 1), np.float32)])


def test_rendered_glyphs_are_the_bitmaps_scaled():
    rng = np.random.default_rng(0)
    image = render("7", scale=2, rng=rng, noise=0.0)[..., 0]
    ink_rows, ink_cols = np.nonzero(image)
    crop = image[ink_rows.min():ink_rows.max() + 1, ink_cols.min():ink_cols.max() + 1]
    np.testing.assert_array_equal(crop[::2, ::2], GLYPHS["7"])
    with pytest.raises(ValueError):
        render("7a", scale=1, rng=rng)


def test_generated_set_is_deterministic_and_varied():
    first, second = generate(30, seed=5), generate(30, seed=5)
    assert first.texts == second.texts
    assert all(np.array_equal(a, b) for a, b in zip(first.images, second.images))
    heights = {image.shape[0] for image in first.images}
    widths = {image.shape[1] for image in first.images}
    assert len(heights) > 2 and len(widths) > 5
    assert all(set(text) <= set(ALPHABET) for text in first.texts)
    assert len(set(first.texts)) > 20
    assert [[ALPHABET[i] for i in label] for label in first.labels()] == [list(t) for t in first.texts]
