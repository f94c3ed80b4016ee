"""Training-time augmentation of text-line and word images.

Each training example is distorted anew in every epoch, the way hands and scanners vary: height
jitter (random vertical padding before the image is scaled back to its height), slant (shear),
small rotation, horizontal scale, grid and elastic warps, stroke width (grey erosion/dilation),
holes in the ink (coarse dropout: broken or faint strokes), blur, noise, and contrast/ink-level
changes. The transforms come from `albumentations` (Buslaev et
al. 2020; OpenCV kernels, seedable per call) rather than hand-written image code; `augraphy`'s
paper and printing effects were left out: they model printed documents and take tens of ms per
line.

An :class:`Augmenter` is deterministic per ``(seed, epoch, example)`` and thread-safe (one
pipeline per thread), so the data pipeline may augment in parallel threads
(:func:`tfnhr.data.dataset.make_dataset`). Images keep tfnhr's on-disk convention
(:mod:`tfnhr.data.images`): uint8 ``[H, W]``, dark ink on a light background; the output has the
input's height ``H`` (a model with a fixed input height still fits). Its width follows the
distortions, narrower or wider, but never below the example's floor (``min_widths``: the fewest
columns with which CTC can still align its text, :func:`tfnhr.data.samples.ctc_min_widths`);
without floors it keeps at least the input's width. (Always keeping the input's width would undo
every horizontal squeeze and the height jitter's narrowing: training would only ever see lines as
wide as rendered or wider, never the tighter hands of the validation fonts.)
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Sequence

import numpy as np

from tfnhr.config.choices import AUGMENT_LEVELS

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # no network look-up at import
import albumentations  # noqa: E402
import cv2  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Strength:
    """Magnitudes of the transforms of one level; every transform is applied with ``probability``
    except the affine one (always; its parameters include the identity).

    Attributes:
      probability: chance of each optional transform per example.
      pad: most vertical padding per side, fraction of the height (text then shrinks by up to
        ``1 / (1 + 2 pad)`` when scaled back: the height jitter).
      shear: most shear, degrees either way (slant).
      rotate: most rotation, degrees either way.
      stretch: horizontal scale drawn from ``1 +- stretch``.
      grid: most displacement of the grid warp's nodes, fraction of a cell.
      elastic: displacement of the elastic warp, px (before smoothing with ``sigma`` px).
      stroke: whether strokes are thickened or thinned (grey dilation/erosion, 2 px kernel).
      holes: most gaps cut into the ink per height's worth of width (coarse dropout: paper-coloured
        rectangles with sides of :data:`HOLE_SIDES` of the height; at least a quarter as many),
        like broken or faint strokes; 0: none.
      blur: most Gaussian blur sigma, px.
      noise: most Gaussian noise standard deviation, fraction of the gray range.
      contrast: most relative ink-contrast change either way.
    """

    probability: float
    pad: float
    shear: float
    rotate: float
    stretch: float
    grid: float
    elastic: float
    stroke: bool
    holes: float
    blur: float
    noise: float
    contrast: float


LEVELS: dict[str, Strength] = {
    "light": Strength(probability=0.25, pad=0.08, shear=8.0, rotate=0.5, stretch=0.08, grid=0.1, elastic=0.0,
                      stroke=False, holes=0.0, blur=0.6, noise=0.03, contrast=0.2),
    "default": Strength(probability=0.4, pad=0.15, shear=15.0, rotate=1.0, stretch=0.15, grid=0.2, elastic=8.0,
                        stroke=True, holes=3.0, blur=0.9, noise=0.06, contrast=0.35),
    "strong": Strength(probability=0.6, pad=0.25, shear=22.0, rotate=2.0, stretch=0.25, grid=0.3, elastic=14.0,
                       stroke=True, holes=4.5, blur=1.2, noise=0.1, contrast=0.5),
}
"""The ``--augment`` levels (``none`` is no :class:`Augmenter` at all)."""

ELASTIC_SIGMA = 5.0
"""Smoothing of the elastic displacement field, px: warps of about a stroke's size."""

HOLE_SIDES = (0.09, 0.22)
"""Sides of the holes (:attr:`Strength.holes`), fractions of the image's height: 3-7 px at 32 px."""


def _shape_pipeline(strength: Strength) -> albumentations.Compose:
    """The geometric and stroke-width transforms of ``strength`` on ink images (0 = paper),
    paper-coloured borders."""
    p = strength.probability
    border = {"border_mode": cv2.BORDER_CONSTANT, "fill": 0}
    transforms = [
        albumentations.CropAndPad(percent=((0.0, strength.pad), (0.0, 0.0), (0.0, strength.pad), (0.0, 0.0)), keep_size=False,
                                  sample_independently=True, **border, p=p),
        albumentations.Affine(shear={"x": (-strength.shear, strength.shear), "y": (0.0, 0.0)},
                              rotate=(-strength.rotate, strength.rotate),
                              scale={"x": (1 - strength.stretch, 1 + strength.stretch), "y": (1.0, 1.0)},
                              fit_output=True, **border, p=1.0),
        albumentations.GridDistortion(num_steps=5, distort_limit=strength.grid, **border, p=p),
    ]
    if strength.elastic:
        transforms.append(albumentations.ElasticTransform(alpha=strength.elastic, sigma=ELASTIC_SIGMA, **border, p=p))
    if strength.stroke:
        transforms.append(albumentations.OneOf([albumentations.Morphological(scale=2, operation="dilation"),
                                                albumentations.Morphological(scale=2, operation="erosion")], p=p))
    return albumentations.Compose(transforms)


def _holes_pipeline(strength: Strength, height: int, squares: int) -> albumentations.Compose:
    """Coarse dropout of ``strength`` on ink images ``height`` px high and about ``squares``
    heights wide: up to ``strength.holes * squares`` paper-coloured holes."""
    most = max(1, round(strength.holes * squares))
    sides = tuple(max(1, round(fraction * height)) for fraction in HOLE_SIDES)
    return albumentations.Compose([albumentations.CoarseDropout(
        num_holes_range=(max(1, most // 4), most), hole_height_range=sides, hole_width_range=sides, fill=0,
        p=strength.probability)])


def _photometric_pipeline(strength: Strength) -> albumentations.Compose:
    """Blur, contrast and noise of ``strength`` on ink images."""
    p = strength.probability
    return albumentations.Compose([
        albumentations.GaussianBlur(sigma_limit=(0.1, strength.blur), p=p),
        albumentations.RandomBrightnessContrast(brightness_limit=0.0, contrast_limit=strength.contrast, p=p),
        albumentations.GaussNoise(std_range=(0.0, strength.noise), p=p),
    ])


class Augmenter:
    """Random distortions of one level (:data:`LEVELS`), the same for the same ``(seed, epoch, index)``.

    Args:
      level: "light", "default" or "strong".
      seed: the run's seed.
      min_widths: per example index, the fewest columns its output may have (px; e.g.
        :func:`tfnhr.data.samples.ctc_min_widths`); ``None``: the input's width.

    Call it as ``augmenter(gray, epoch, index)`` with a uint8 ``[H, W]`` image (dark ink on light
    paper); it returns a new uint8 ``[H, W']`` image with ``W' >= min_widths[index]`` (or ``W``).
    """

    def __init__(self, level: str = "default", seed: int = 0, min_widths: Sequence[int] | None = None) -> None:
        if level not in LEVELS:
            raise ValueError(f"augmentation level must be one of {tuple(LEVELS)} (or none), got {level!r}")
        self.level, self.seed, self.strength = level, seed, LEVELS[level]
        self.min_widths = None if min_widths is None else np.asarray(min_widths, np.int64)
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"Augmenter(level={self.level!r}, seed={self.seed})"

    def _pipelines(self, height: int, width: int) -> tuple[albumentations.Compose, albumentations.Compose | None,
                                                            albumentations.Compose]:
        """This thread's pipelines for an ink image ``height`` x ``width`` px: shape, holes (one per
        height and width in whole heights; ``None`` if the level has none) and photometric."""
        cache = getattr(self._local, "pipelines", None)
        if cache is None:
            cache = self._local.pipelines = {"shape": _shape_pipeline(self.strength),
                                             "photometric": _photometric_pipeline(self.strength)}
        holes = None
        if self.strength.holes:
            key = (height, max(1, round(width / height)))
            if key not in cache:
                cache[key] = _holes_pipeline(self.strength, *key)
            holes = cache[key]
        return cache["shape"], holes, cache["photometric"]

    def __call__(self, gray: np.ndarray, epoch: int, index: int) -> np.ndarray:
        if gray.ndim != 2 or gray.dtype != np.uint8 or 0 in gray.shape:
            raise ValueError(f"augment needs a non-empty uint8 [H, W] image, got {gray.dtype} {gray.shape}")
        height, width = gray.shape
        ink = 255 - gray
        seeds = np.random.SeedSequence([self.seed, epoch, index]).generate_state(3)
        for pipeline, seed in zip(self._pipelines(height, width), seeds):
            if pipeline is not None:
                pipeline.set_random_seed(int(seed))
                ink = pipeline(image=ink)["image"]
        floor = width if self.min_widths is None else max(1, int(self.min_widths[index]))
        new_width = max(floor, round(ink.shape[1] * height / ink.shape[0]))
        if ink.shape != (height, new_width):
            ink = cv2.resize(ink, (new_width, height), interpolation=cv2.INTER_AREA)
        return 255 - ink


def make_augmenter(level: str, seed: int, min_widths: Sequence[int] | None = None) -> Augmenter | None:
    """The :class:`Augmenter` of ``level`` (one of :data:`tfnhr.config.choices.AUGMENT_LEVELS`) with the
    examples' ``min_widths``; ``None`` for "none"."""
    if level not in AUGMENT_LEVELS:
        raise ValueError(f"augment must be one of {AUGMENT_LEVELS}, got {level!r}")
    return None if level == "none" else Augmenter(level, seed, min_widths)
