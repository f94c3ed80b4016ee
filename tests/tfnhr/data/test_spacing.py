"""Stroke-spacing normalization (:mod:`tfnhr.data.spacing`) against a closed form (evenly spaced
bars) and a plain-Python re-implementation of the estimate's definition, pixel by pixel."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tfnhr.data.spacing import (FACTOR_LIMITS, MIN_CONTRAST, PAPER_RANK, median_spacing, normalize_spacing,
                                spacing_factor, stroke_spacing)


def bars(height: int, count: int, pitch: int, bar: int = 2, margin: int = 5, core: tuple[int, int] | None = None,
         paper: int = 240, ink: int = 20) -> np.ndarray:
    """``count`` vertical ink bars ``bar`` px wide, one every ``pitch`` px, over the rows ``core``
    (default: all), ``margin`` px of paper each side."""
    width = 2 * margin + (count - 1) * pitch + bar
    gray = np.full((height, width), paper, np.uint8)
    top, bottom = core or (0, height)
    for k in range(count):
        gray[top:bottom, margin + k * pitch:margin + k * pitch + bar] = ink
    return gray


def reference_spacing(gray: np.ndarray) -> float | None:
    """The module docstring's definition, one pixel at a time."""
    values = sorted(int(v) for v in gray.ravel())
    paper, darkest = values[math.floor(PAPER_RANK * (len(values) - 1))], values[0]
    if paper - darkest < MIN_CONTRAST:
        return None
    height, width = gray.shape
    ink = [[2 * int(gray[r, c]) < paper + darkest for c in range(width)] for r in range(height)]
    counts = [sum(row) for row in ink]
    core_rows = [r for r in range(height) if 2 * counts[r] >= max(counts)]
    runs = [sum(1 for c in range(width) if ink[r][c] and (c == 0 or not ink[r][c - 1])) for r in core_rows]
    inked = [c for c in range(width) if any(ink[r][c] for r in range(height))]
    return (inked[-1] - inked[0] + 1) / max(1.0, sum(runs) / len(runs)) / height


@pytest.mark.parametrize("count, pitch", [(1, 5), (7, 6), (12, 11), (30, 4)])
def test_evenly_spaced_bars_give_their_pitch(count, pitch):
    """``count`` bars ``pitch`` apart span ``(count - 1) * pitch + 2`` px: that over ``count`` strokes."""
    gray = bars(32, count, pitch)
    assert stroke_spacing(gray) == pytest.approx(((count - 1) * pitch + 2) / count / 32)


def test_ascenders_and_descenders_do_not_count_as_strokes():
    """Tall strokes over a few columns (ascenders) add little ink per row: the core rows are those
    of the lower-case band, whose strokes are counted."""
    gray = bars(32, 10, 8, core=(10, 24))
    gray[2:30, 20:22] = 20  # one ascender-descender stroke through the band, on a bar
    gray[2:10, 45:47] = 20  # an ascender between bars
    assert stroke_spacing(gray) == pytest.approx((9 * 8 + 2) / 10 / 32)


@pytest.mark.parametrize("seed", range(6))
def test_the_estimate_is_its_definition(seed):
    rng = np.random.default_rng(seed)
    height, width = rng.integers(4, 40), rng.integers(4, 120)
    gray = np.where(rng.random((height, width)) < rng.uniform(0.05, 0.5), rng.integers(0, 120, (height, width)),
                    rng.integers(150, 256, (height, width))).astype(np.uint8)
    assert stroke_spacing(gray) == pytest.approx(reference_spacing(gray), rel=1e-12)


def test_an_image_without_ink_keeps_its_width():
    blank = np.full((20, 50), 200, np.uint8)
    blank[3, 7] = 200 - MIN_CONTRAST + 1  # a speck fainter than the contrast asked for
    assert stroke_spacing(blank) is None and spacing_factor(blank, 0.3) == 1.0
    assert normalize_spacing(blank, 0.3) is blank
    with pytest.raises(ValueError, match="no image with ink"):
        median_spacing([blank, blank])


def test_normalizing_brings_the_spacing_to_the_target_within_the_limits():
    gray = bars(32, 12, 6)  # 0.19 of the height
    target = 0.3
    factor = target / stroke_spacing(gray)
    assert spacing_factor(gray, target) == pytest.approx(factor)
    normalized = normalize_spacing(gray, target)
    assert normalized.shape == (32, round(gray.shape[1] * factor))
    assert stroke_spacing(normalized) == pytest.approx(target, rel=0.05)
    assert normalize_spacing(gray, None) is gray
    low, high = FACTOR_LIMITS
    assert spacing_factor(gray, 100.0) == high and spacing_factor(gray, 0.001) == low


def test_the_target_is_the_median_of_the_lines_with_ink():
    lines = [bars(16, 8, pitch) for pitch in (4, 6, 9)] + [np.full((16, 30), 255, np.uint8)]
    assert median_spacing(lines) == pytest.approx(stroke_spacing(lines[1]))


def test_a_bad_image_is_refused():
    with pytest.raises(ValueError, match="non-empty"):
        stroke_spacing(np.zeros((0, 5), np.uint8))


def test_a_line_is_never_narrowed_below_its_floor():
    gray = bars(16, 4, 12)  # 0.59 of the height: a target of 0.3 halves it
    assert normalize_spacing(gray, 0.3).shape[1] == round(gray.shape[1] * spacing_factor(gray, 0.3))
    assert normalize_spacing(gray, 0.3, min_width=40).shape == (16, 40)
    assert normalize_spacing(gray, 0.3, min_width=2 * gray.shape[1]).shape == gray.shape  # never widened for it
    assert normalize_spacing(gray, 1.0, min_width=40).shape[1] == round(gray.shape[1] * spacing_factor(gray, 1.0))
