"""Cutting text-line images out of page images along their layout polygons.

A line image is the polygon's bounding box on the page, with every pixel outside the polygon set
to the paper's gray level (the median gray inside the polygon: lines are mostly paper), and
optionally deskewed: rotated so that the baseline's least-squares direction is horizontal, then
cut to the rotated polygon's bounding box. Polygons are cleaned and clipped to the image with
Shapely (self-intersecting ones repaired with ``make_valid``); filling and rotating use OpenCV.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import cv2
import numpy as np
import shapely
from shapely.geometry import MultiPolygon, Polygon, box

MIN_AREA_PX = 4.0
"""Polygons (after repair) with less area than this, in square pixels, are degenerate."""
MIN_SKEW_DEGREES = 0.1
"""Baselines closer to horizontal than this are not rotated (saves an interpolation)."""

Points = Sequence[tuple[float, float]]


@dataclasses.dataclass(frozen=True)
class LineCut:
    """A cut line: ``image`` uint8 ``[h, w]`` and ``to_page``, the 2x3 affine map from its pixel
    coordinates ``(x, y)`` to the page's."""

    image: np.ndarray
    to_page: np.ndarray

    def page_points(self, points: Points) -> list[tuple[float, float]]:
        """Points of the line image in page pixels."""
        moved = np.asarray(points, np.float64).reshape(-1, 2) @ self.to_page[:, :2].T + self.to_page[:, 2]
        return [(float(x), float(y)) for x, y in moved]


class LineCutError(ValueError):
    """A line cannot be cut: ``reason`` is ``"degenerate"`` (empty, fewer than 3 points, no area)
    or ``"outside"`` (no part of the polygon lies on the image)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def line_region(points: Points, image_size: tuple[int, int]) -> Polygon | MultiPolygon:
    """The polygon of ``points`` (page pixels, ``(x, y)``), repaired and clipped to the image of
    ``image_size`` ``(width, height)``; :class:`LineCutError` if degenerate or outside."""
    if len(points) < 3:
        raise LineCutError("degenerate", f"a polygon needs at least 3 points, got {len(points)}")
    region = shapely.make_valid(Polygon(points))
    region = shapely.union_all([part for part in getattr(region, "geoms", [region])
                                if isinstance(part, (Polygon, MultiPolygon))])
    if region.is_empty or region.area < MIN_AREA_PX:
        raise LineCutError("degenerate", f"the polygon has an area of {region.area:.1f} px²")
    clipped = region.intersection(box(0, 0, *image_size))
    clipped = shapely.union_all([part for part in getattr(clipped, "geoms", [clipped])
                                 if isinstance(part, (Polygon, MultiPolygon))])
    if clipped.is_empty or clipped.area < MIN_AREA_PX:
        bounds = ", ".join(f"{value:.0f}" for value in region.bounds)
        raise LineCutError("outside", f"the polygon (bounds {bounds}) lies outside the "
                                      f"{image_size[0]}x{image_size[1]} px image")
    return clipped


def baseline_angle(baseline: Points) -> float | None:
    """The baseline's direction in degrees (image coordinates, y down: positive descends to the
    right), from a least-squares line through its points; ``None`` without two distinct x."""
    if len(baseline) < 2:
        return None
    xs, ys = (np.array(values, dtype=np.float64) for values in zip(*baseline))
    if np.ptp(xs) <= 0:
        return None
    slope = np.polyfit(xs - xs.mean(), ys, 1)[0]
    return math.degrees(math.atan(slope))


def cut_line(page: np.ndarray, points: Points, baseline: Points = (), deskew: bool = True) -> LineCut:
    """The line of polygon ``points`` on the uint8 gray ``page`` ``[H, W]``: its image uint8
    ``[h, w]`` (see the module docstring) and where it lies on the page. ``baseline`` (page
    pixels) sets the rotation when ``deskew``; without a usable baseline the line is not rotated.

    Raises :class:`LineCutError` for degenerate polygons and polygons outside the page.
    """
    region = line_region(points, (page.shape[1], page.shape[0]))
    x0, y0, x1, y1 = _pixel_bounds(region, page.shape)
    crop = page[y0:y1, x0:x1]
    mask = np.zeros(crop.shape, np.uint8)
    for polygon in getattr(region, "geoms", [region]):
        outline = np.asarray(polygon.exterior.coords, dtype=np.float64) - (x0, y0)
        cv2.fillPoly(mask, [np.round(outline).astype(np.int32)], 255)
    if not mask.any():  # a sliver thinner than a pixel row: keep the box
        mask[:] = 255
    paper = int(np.median(crop[mask > 0]))
    line = np.where(mask > 0, crop, np.uint8(paper)).astype(np.uint8)
    to_page = np.array([[1.0, 0.0, x0], [0.0, 1.0, y0]])
    angle = baseline_angle(baseline) if deskew else None
    if angle is None or abs(angle) < MIN_SKEW_DEGREES:
        return LineCut(line, to_page)
    leveled, to_crop = _rotate_level(line, mask, angle, paper)
    return LineCut(leveled, _compose(to_page, to_crop))


def _compose(outer: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """The 2x3 affine map ``outer ∘ inner``."""
    return outer[:, :2] @ inner + np.hstack([np.zeros((2, 2)), outer[:, 2:]])


def _pixel_bounds(region, shape: tuple[int, int]) -> tuple[int, int, int, int]:
    """Integer ``(x0, y0, x1, y1)`` covering ``region``, within the image, at least 1 px wide and high."""
    left, top, right, bottom = region.bounds
    x0, y0 = max(0, math.floor(left)), max(0, math.floor(top))
    x1, y1 = min(shape[1], max(x0 + 1, math.ceil(right))), min(shape[0], max(y0 + 1, math.ceil(bottom)))
    return x0, y0, x1, y1


def _rotate_level(line: np.ndarray, mask: np.ndarray, angle: float, paper: int) -> tuple[np.ndarray, np.ndarray]:
    """``line`` rotated by ``angle`` degrees about its centre (bilinear, paper outside), on a
    canvas that holds all of it, cut to the rotated mask's bounding box; and the 2x3 map from
    the result's pixels back to ``line``'s."""
    height, width = line.shape
    rotation = cv2.getRotationMatrix2D(((width - 1) / 2, (height - 1) / 2), angle, 1.0)
    cos, sin = abs(rotation[0, 0]), abs(rotation[0, 1])
    out_width, out_height = math.ceil(width * cos + height * sin), math.ceil(width * sin + height * cos)
    rotation[0, 2] += (out_width - width) / 2
    rotation[1, 2] += (out_height - height) / 2
    size = (out_width, out_height)
    rotated = cv2.warpAffine(line, rotation, size, flags=cv2.INTER_LINEAR, borderValue=paper)
    rotated_mask = cv2.warpAffine(mask, rotation, size, flags=cv2.INTER_NEAREST, borderValue=0)
    rows, cols = np.flatnonzero(rotated_mask.any(axis=1)), np.flatnonzero(rotated_mask.any(axis=0))
    if not len(rows):
        return line, np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    rotated[rotated_mask == 0] = paper
    back = cv2.invertAffineTransform(rotation)
    back[:, 2] += back[:, :2] @ (cols[0], rows[0])
    return rotated[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1], back
