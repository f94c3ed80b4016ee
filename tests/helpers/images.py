"""Small random gray images for data tests (samples, datasets)."""

from __future__ import annotations

import numpy as np


def random_gray(height, width, seed=0):
    """A ``[height, width]`` uint8 gray image of uniform noise, the same for the same ``seed``."""
    return np.random.default_rng(seed).integers(0, 256, size=(height, width), dtype=np.uint8)
