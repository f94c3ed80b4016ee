"""The embedded digit-string data (:mod:`tfnhr.data.synthetic.digit_strings`): glyph bitmaps rendered to
scale, and generated sets that are deterministic per seed and varied."""

from __future__ import annotations

import numpy as np
import pytest

from tfnhr.data.synthetic.digit_strings import ALPHABET, GLYPHS, generate, render


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
