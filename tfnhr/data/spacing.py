"""Stroke-spacing normalization: scale a text line's width so that its vertical strokes lie a
set distance apart.

Hands differ in how wide they write: on the main job's fonts the mean distance between two
vertical strokes ranges from 0.20 to 0.44 of the line height (Kristi 0.22, Breip 0.32). A model
that sees every line at one spacing need not learn every width. :func:`stroke_spacing` estimates
a line's spacing from its ink; :func:`normalize_spacing` scales the line's width to a target
spacing (the median of the training lines, which a model trained so keeps as
:attr:`tfnhr.models.CtcModel.stroke_spacing`, so that reading applies the same).

The estimate uses only integer counts of the gray image (no interpolated quantiles), so that
:func:`tfnhr.serving.export.spacing_factor_graph` computes the same value in TensorFlow ops:

1. paper level ``P``: the gray value at rank ``floor(0.9 (N - 1))`` of the image's sorted ``N``
   pixels; darkest ``D``: the minimum. An image with ``P - D <`` :data:`MIN_CONTRAST` has no
   readable ink (``None``).
2. ink: ``2 * gray < P + D``.
3. core rows: the rows whose ink count is at least half the largest row count (the band of the
   lower-case letters; ascenders and descenders add few ink pixels to a row).
4. strokes of a core row: its ink runs (starts of ink from the left); their mean over the core
   rows is the line's stroke count.
5. spacing: ink extent (first to last column holding ink) / stroke count / image height.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tfnhr.data.images import scale_width

PAPER_RANK = 0.9
"""Quantile (by rank, no interpolation) of an image's gray values taken as its paper level."""

MIN_CONTRAST = 32
"""Gray levels between paper and darkest ink below which an image counts as blank."""

FACTOR_LIMITS = (0.5, 2.0)
"""The width factor :func:`spacing_factor` allows: a line is never squeezed to less than half or
stretched to more than twice its width, whatever the estimate."""


def stroke_spacing(gray: np.ndarray) -> float | None:
    """Mean distance between vertical strokes along the core rows of uint8 ``[H, W]`` gray
    (0 = ink), as a fraction of ``H`` (see the module docstring); ``None`` without ink."""
    if gray.ndim != 2 or gray.size == 0:
        raise ValueError(f"expected a non-empty [H, W] gray image, got shape {gray.shape}")
    values = gray.astype(np.int64)
    flat = np.sort(values, axis=None)
    paper, darkest = int(flat[int(PAPER_RANK * (flat.size - 1))]), int(flat[0])
    if paper - darkest < MIN_CONTRAST:
        return None
    ink = 2 * values < paper + darkest
    row_ink = ink.sum(axis=1)
    core = 2 * row_ink >= row_ink.max()
    columns = np.flatnonzero(ink.any(axis=0))
    starts = ink[core, :1].sum(axis=1) + (ink[core, 1:] & ~ink[core, :-1]).sum(axis=1)
    extent = int(columns[-1] - columns[0] + 1)
    return extent / max(1.0, float(starts.mean())) / gray.shape[0]


def spacing_factor(gray: np.ndarray, target: float) -> float:
    """The width factor that brings ``gray``'s :func:`stroke_spacing` to ``target`` (a fraction
    of the height), within :data:`FACTOR_LIMITS`; 1 for an image without ink."""
    spacing = stroke_spacing(gray)
    if spacing is None:
        return 1.0
    low, high = FACTOR_LIMITS
    return float(min(high, max(low, target / spacing)))


def normalize_spacing(gray: np.ndarray, target: float | None, min_width: int = 1) -> np.ndarray:
    """uint8 ``[H, W]`` gray with its width scaled by :func:`spacing_factor` (area averaging when
    narrowing, bilinear when widening), but never narrowed below ``min_width`` px (a training
    line's CTC floor, :func:`tfnhr.data.samples.ctc_min_widths`, so that it stays alignable);
    ``gray`` itself when ``target`` is ``None``."""
    if target is None:
        return gray
    factor = spacing_factor(gray, target)
    return scale_width(gray, max(factor, min(1.0, min_width / gray.shape[1])))


def median_spacing(grays: Iterable[np.ndarray]) -> float:
    """The median :func:`stroke_spacing` of the images that have ink (the target a training set
    gives); ``ValueError`` if none has."""
    spacings = [spacing for spacing in map(stroke_spacing, grays) if spacing is not None]
    if not spacings:
        raise ValueError("no image with ink to measure the stroke spacing of")
    return float(np.median(spacings))
