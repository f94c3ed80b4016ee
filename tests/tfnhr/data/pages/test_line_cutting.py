"""Cutting line images along polygons: exact on an unrotated page, close to the rendered line after
deskewing a rotated one (and much closer than without deskewing), paper outside the polygon, the
map back to the page, and the degenerate and outside cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tfnhr.data.pages.line_cutting import LineCutError, baseline_angle, cut_line, line_region
from tfnhr.data.synthetic.pages import render_page


def aligned_error(cut: np.ndarray, reference: np.ndarray, shift: int = 3) -> float:
    """Mean absolute gray difference of the best alignment (shifts up to ``shift`` px) of the
    overlapping parts of two images of nearly the same size."""
    height, width = min(cut.shape[0], reference.shape[0]), min(cut.shape[1], reference.shape[1])
    best = math.inf
    for dy in range(min(shift, cut.shape[0] - height) + 1):
        for dx in range(min(shift, cut.shape[1] - width) + 1):
            for ey in range(min(shift, reference.shape[0] - height) + 1):
                for ex in range(min(shift, reference.shape[1] - width) + 1):
                    a = cut[dy:dy + height, dx:dx + width].astype(np.int16)
                    b = reference[ey:ey + height, ex:ex + width].astype(np.int16)
                    best = min(best, float(np.abs(a - b).mean()))
    return best


@pytest.mark.parametrize("seed", [0, 1])
def test_lines_of_an_unrotated_page_are_cut_exactly(seed):
    page, lines, angle = render_page(seed, "train", 0, 4, max_angle=0)
    assert angle == 0
    for line in lines:
        cut = cut_line(page, line.polygon, line.baseline)
        np.testing.assert_array_equal(cut.image, line.image)


@pytest.mark.parametrize("seed", [0, 1, 3, 5])  # pages rotated by 2.2, -1.1, -2.7, 2.6 degrees
def test_deskewed_lines_of_a_rotated_page_match_the_rendered_lines(seed):
    """At 1-3 degrees of rotation, the deskewed cut differs from the rendered line by at most
    13 gray levels on average (two interpolations of noisy images) and by less than half of what
    the cut without deskewing differs; its size is within 4 px of the line's."""
    page, lines, angle = render_page(seed, "val", 0, 4, max_angle=3)
    assert abs(angle) > 0.5
    for line in lines:
        leveled = cut_line(page, line.polygon, line.baseline).image
        skewed = cut_line(page, line.polygon, line.baseline, deskew=False).image
        assert np.all(np.abs(np.subtract(leveled.shape, line.image.shape)) <= 4), (leveled.shape, line.image.shape)
        error = aligned_error(leveled, line.image)
        assert error <= 13 and error < 0.5 * aligned_error(skewed, line.image), error


def test_the_cut_maps_back_onto_the_page():
    page, lines, _ = render_page(4, "train", 0, 3, max_angle=3)
    for line in lines:
        cut = cut_line(page, line.polygon, line.baseline)
        height, width = cut.image.shape
        corners = cut.page_points([(0, 0), (width, 0), (width, height), (0, height)])
        assert max(math.dist(a, b) for a, b in zip(corners, line.polygon)) <= 3.0


def test_pixels_outside_the_polygon_become_paper():
    rng = np.random.default_rng(0)
    page = rng.integers(200, 256, size=(50, 80), dtype=np.uint8)
    triangle = [(10, 10), (70, 10), (10, 40)]
    cut = cut_line(page, triangle).image
    assert cut.shape == (30, 60)
    inside = np.array([[x + 10 < 70 - 2 * (y + 10 - 10) - 1 for x in range(60)] for y in range(30)])
    paper = int(np.median(page[10:40, 10:70][inside]))
    below_diagonal = np.array([[x + 10 > 70 - 2 * (y + 10 - 10) + 2 for x in range(60)] for y in range(30)])
    assert np.all(cut[below_diagonal] == paper)
    np.testing.assert_array_equal(cut[inside], page[10:40, 10:70][inside])


def test_a_polygon_partly_off_the_page_is_clipped():
    page = np.full((40, 40), 255, np.uint8)
    cut = cut_line(page, [(-10, 5), (30, 5), (30, 25), (-10, 25)]).image
    assert cut.shape == (20, 30)


@pytest.mark.parametrize("points, reason", [
    ([(0, 0), (10, 10)], "degenerate"),
    ([(0, 0), (10, 0), (20, 0)], "degenerate"),
    ([(5, 5), (5.5, 5), (5.5, 5.5), (5, 5.5)], "degenerate"),
    ([(100, 100), (120, 100), (120, 120), (100, 120)], "outside"),
    ([(-50, -50), (-10, -50), (-10, -10), (-50, -10)], "outside"),
])
def test_degenerate_and_outside_polygons_are_refused_with_their_reason(points, reason):
    with pytest.raises(LineCutError) as raised:
        cut_line(np.zeros((40, 40), np.uint8), points)
    assert raised.value.reason == reason


def test_a_self_intersecting_polygon_is_repaired():
    bow_tie = [(0, 0), (20, 20), (20, 0), (0, 20)]
    region = line_region(bow_tie, (40, 40))
    assert region.is_valid and region.area == pytest.approx(200)


@pytest.mark.parametrize("points, degrees", [
    ([(0, 0), (100, 0)], 0.0),
    ([(0, 0), (100, 100)], 45.0),
    ([(0, 10), (50, 5), (100, 0)], -math.degrees(math.atan(0.1))),
    ([(0, 0)], None),
    ([(5, 0), (5, 10)], None),
])
def test_baseline_angle(points, degrees):
    assert baseline_angle(points) == (None if degrees is None else pytest.approx(degrees))
