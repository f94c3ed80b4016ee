"""Training-time augmentation (:mod:`tfnhr.data.augment`): determinism per (seed, epoch, example),
thread safety, the image contract (height kept, width not below its floor, uint8 dark-on-light), geometry
bounds that keep a label readable (ink kept, left-to-right order kept, nothing cut off), and the
wiring into :func:`tfnhr.data.dataset.make_dataset`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tfnhr.charset import Charset
from tfnhr.data.synthetic import handwriting
from tfnhr.data.augment import HOLE_SIDES, LEVELS, Augmenter, _holes_pipeline, make_augmenter
from tfnhr.data.dataset import make_dataset
from tfnhr.data.samples import TextImageSet


def _two_blobs(height: int = 32, width: int = 200) -> np.ndarray:
    """Paper (gray 240) with two dark blocks far apart: left at columns 30..60, right at 140..170."""
    image = np.full((height, width), 240, np.uint8)
    image[8:24, 30:60] = 20
    image[8:24, 140:170] = 20
    return image


def _ink(image: np.ndarray) -> np.ndarray:
    """Ink amount per pixel in [0, 1] relative to the paper (the image's median); below 0.25
    (paper noise) counts as none."""
    paper = float(np.median(image))
    ink = np.clip((paper - image.astype(np.float32)) / max(paper, 1.0), 0.0, 1.0)
    return np.where(ink < 0.25, 0.0, ink)


def _lines(count: int = 3) -> list[np.ndarray]:
    return [image for image, _ in handwriting.generate(count, seed=5)]


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_same_seed_epoch_and_example_give_the_same_image(level):
    image = _lines(1)[0]
    first, second = Augmenter(level, seed=3), Augmenter(level, seed=3)
    np.testing.assert_array_equal(first(image, 2, 7), second(image, 2, 7))
    np.testing.assert_array_equal(first(image, 2, 7), first(image, 2, 7))  # no hidden state
    others = [first(image, 3, 7), first(image, 2, 8), Augmenter(level, seed=4)(image, 2, 7)]
    assert all(not np.array_equal(first(image, 2, 7), other) for other in others)


def test_threads_give_what_one_thread_gives():
    augmenter, images = Augmenter("strong", seed=1), _lines(4)
    jobs = [(index % 4, epoch, index) for epoch in range(3) for index in range(8)]
    serial = [augmenter(images[i], epoch, index) for i, epoch, index in jobs]
    with ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(lambda job: augmenter(images[job[0]], job[1], job[2]), jobs))
    for one, other in zip(serial, parallel):
        np.testing.assert_array_equal(one, other)


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_height_kept_width_not_shrunk_dark_ink_on_light_paper(level):
    augmenter = Augmenter(level, seed=0)
    for index, image in enumerate(_lines(3)):
        for epoch in range(4):
            out = augmenter(image, epoch, index)
            assert out.dtype == np.uint8 and out.ndim == 2
            assert out.shape[0] == image.shape[0] and out.shape[1] >= image.shape[1]
            assert np.median(out) > 150 and out.min() < np.median(out) - 60  # paper stays light, ink dark


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_with_floors_lines_also_narrow_but_never_below_their_floor(level):
    """Given per-example floors, the squeezes and the height jitter (padding, and the height a
    rotation adds) narrow lines too, by varying amounts, and no output is narrower than its floor."""
    images = _lines(3)
    floors = [int(0.9 * image.shape[1]) for image in images]
    augmenter = Augmenter(level, seed=2, min_widths=floors)
    ratios = []
    for index, image in enumerate(images):
        for epoch in range(12):
            out = augmenter(image, epoch, index)
            assert out.shape[0] == image.shape[0] and out.shape[1] >= floors[index]
            ratios.append(out.shape[1] / image.shape[1])
    assert min(ratios) < 0.97 and max(ratios) - min(ratios) > 0.04
    assert any(abs(ratio - 0.9) < 0.01 for ratio in ratios)  # the floor binds somewhere


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_geometry_keeps_both_marks_in_order_and_inside(level):
    image, augmenter = _two_blobs(), Augmenter(level, seed=11)
    original = _ink(image).sum()
    for epoch in range(25):
        ink = _ink(augmenter(image, epoch, 0))
        columns = ink.sum(axis=0) > 2.0  # the marks put ~16 rows of ink into their columns
        runs = np.flatnonzero(np.diff(np.concatenate([[0], columns.astype(int), [0]])))
        starts, ends = runs[::2], runs[1::2]
        assert len(starts) == 2, f"epoch {epoch}: the gap between the marks closed or a mark broke up"
        left, right = ink[:, starts[0]:ends[0]].sum(), ink[:, starts[1]:ends[1]].sum()
        # Each mark keeps a comparable amount of ink (area shrinks with the height jitter, ink with contrast).
        assert 0.25 * original / 2 < left < 2.2 * original / 2 and 0.25 * original / 2 < right < 2.2 * original / 2
        # Nothing is cut off: the outermost columns and rows hold (almost) no ink.
        assert ink[:, :2].sum() < 0.02 * left and ink[:, -2:].sum() < 0.02 * right
        assert ink[[0, -1]].sum() < 0.02 * (left + right)


def test_levels_grow_in_strength_and_bad_levels_fail():
    light, default, strong = LEVELS["light"], LEVELS["default"], LEVELS["strong"]
    for field in ("probability", "pad", "shear", "rotate", "stretch", "grid", "holes", "blur", "noise", "contrast"):
        assert getattr(light, field) <= getattr(default, field) <= getattr(strong, field), field
    assert make_augmenter("none", 0) is None
    assert isinstance(make_augmenter("light", 0), Augmenter)
    with pytest.raises(ValueError, match="augment must be one of"):
        make_augmenter("extreme", 0)
    with pytest.raises(ValueError, match="level"):
        Augmenter("none")
    with pytest.raises(ValueError, match="uint8"):
        Augmenter()(np.zeros((4, 4, 1), np.uint8), 0, 0)


def test_make_dataset_augments_each_example_with_its_epoch_and_index():
    images = [np.full((8, 10 + i), 200, np.uint8) for i in range(6)]
    data = TextImageSet(ids=[str(i) for i in range(6)], images=images, texts=["ab"] * 6)
    calls = []

    def widen(gray, epoch, index):  # a reference "augmentation": width grows by epoch + 1 columns
        calls.append((epoch, index))
        return np.pad(gray, ((0, 0), (0, epoch + 1)), constant_values=255)

    dataset = make_dataset(data, Charset("ab", with_unknown=False), batch_pixels=400, seed=1, first_epoch=3,
                           augment=widen)
    for epoch in (3, 4):
        seen = []
        for batch_images, _ in dataset:
            seen += [int(image.bounding_shape()[1]) for image in batch_images]
        assert sorted(seen) == sorted(10 + i + epoch + 1 for i in range(6))
    assert sorted(calls) == sorted((epoch, index) for epoch in (3, 4) for index in range(6))


@pytest.mark.parametrize("height, width", [(32, 352), (32, 64), (48, 480)])
def test_holes_are_paper_rectangles_of_the_levels_size_and_number(height, width):
    strength = LEVELS["default"]
    squares = round(width / height)
    most, (small, large) = round(strength.holes * squares), (round(f * height) for f in HOLE_SIDES)
    pipeline = _holes_pipeline(strength, height, squares)
    solid = np.full((height, width), 255, np.uint8)  # ink everywhere
    with_holes = 0
    for seed in range(60):
        pipeline.set_random_seed(seed)
        out = pipeline(image=solid)["image"]
        assert set(np.unique(out)) <= {0, 255}  # holes are paper, the rest untouched
        gaps = out == 0
        if not gaps.any():
            continue
        with_holes += 1
        rows, columns = np.flatnonzero(gaps.any(axis=1)), np.flatnonzero(gaps.any(axis=0))
        assert rows.size >= small and columns.size >= small  # at least one hole of the smallest side
        assert small * small <= gaps.sum() <= most * large * large
    assert 0.2 * 60 <= with_holes <= 0.6 * 60  # the level's probability, 0.4
