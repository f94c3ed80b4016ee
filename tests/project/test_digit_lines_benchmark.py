"""The set builder of benchmarks/handwritten_digit_lines.py: disjoint digit pools, determinism,
texts and images in tfnhr's convention, visible spaces between digit groups, and an HDF5 file that
tfnhr reads back as written."""

from __future__ import annotations

import importlib.util
import re
import sys

import numpy as np
import pytest

from tests.helpers.environment import REPO

BENCHMARKS = REPO / "benchmarks"
TEXT = re.compile(r"^[0-9]+( [0-9]+){0,2}$")


@pytest.fixture(scope="module")
def bench():
    """The benchmark script as a module (its folder on sys.path while it loads, for ``_harness``)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location("handwritten_digit_lines",
                                                      BENCHMARKS / "handwritten_digit_lines.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while it loads
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


@pytest.fixture(scope="module")
def digits(bench):
    return bench.load_mnist_digits()


@pytest.fixture(scope="module")
def lines(bench, digits):
    return bench.build_set({"train": 150, "val": 25, "test": 25}, seed=7, digits=digits)


def test_the_digits_are_mlxtends_mnist_subset(digits):
    images, labels = digits
    assert images.shape == (5000, 28, 28) and images.dtype == np.uint8
    assert np.bincount(labels).tolist() == [500] * 10
    assert images.max() == 255 and np.median(images) == 0  # white ink on black


def test_pools_are_disjoint_and_cover_the_samples(bench, lines, digits):
    pools = bench.split_pools(5000, seed=7)
    assert {subset: len(pool) for subset, pool in pools.items()} == {"train": 3500, "val": 500, "test": 1000}
    everything = np.concatenate(list(pools.values()))
    assert len(np.unique(everything)) == 5000 and set(everything.tolist()) == set(range(5000))
    # Every line draws only from its subset's pool, and its digits are the samples' labels.
    _, labels = digits
    for subset, subset_lines in lines.items():
        pool = set(pools[subset].tolist())
        for line in subset_lines:
            assert set(line.samples) <= pool
            assert "".join(str(labels[s]) for s in line.samples) == line.text.replace(" ", "")


def test_the_same_seed_gives_the_same_set_and_another_seed_another(bench, digits, lines):
    again = bench.build_set({"train": 150, "val": 25, "test": 25}, seed=7, digits=digits)
    for subset in lines:
        assert [line.text for line in again[subset]] == [line.text for line in lines[subset]]
        assert all(np.array_equal(a.gray, b.gray) for a, b in zip(again[subset], lines[subset]))
    other = bench.build_set({"train": 150, "val": 25, "test": 25}, seed=8, digits=digits)
    assert [line.text for line in other["train"]] != [line.text for line in lines["train"]]
    assert not all(a.gray.shape == b.gray.shape and np.array_equal(a.gray, b.gray)
                   for a, b in zip(other["train"], lines["train"]))


def test_texts_and_images(lines):
    all_lines = [line for subset_lines in lines.values() for line in subset_lines]
    group_counts = set()
    for line in all_lines:
        assert TEXT.match(line.text), line.text
        assert 3 <= len(line.text.replace(" ", "")) <= 9
        group_counts.add(line.text.count(" ") + 1)
        gray = line.gray
        assert gray.dtype == np.uint8 and gray.ndim == 2
        assert np.median(gray) > 200 and gray.min() < 100, line.text  # dark ink on light paper
        assert 26 <= gray.shape[0] <= 48
    assert group_counts == {1, 2, 3}


def test_digit_groups_are_separated_by_blank_paper(lines):
    """Between two groups every column is paper (no ink), and that gap is at least as wide as
    any gap between digits of a group: the space is visible."""
    checked = 0
    for line in lines["train"]:
        boxes = line.layout.boxes
        assert [len(group) for group in boxes] == [len(group) for group in line.text.split(" ")]
        paper = np.median(line.gray)
        within = [max(0, b[0] - a[1]) for group in boxes for a, b in zip(group, group[1:])]
        for left, right in zip(boxes, boxes[1:]):
            start, stop = left[-1][1], right[0][0]
            assert stop - start >= max(within, default=0) and stop - start >= 8
            assert line.gray[:, start:stop].min() > paper - 60, line.text
            checked += 1
        # Each digit's box holds ink.
        assert all(line.gray[:, x0:x1].min() < paper - 100 for group in boxes for x0, x1 in group)
    assert checked > 50


def test_the_hdf5_file_reads_back_as_written(bench, lines, tmp_path):
    from tfnhr.data.formats.hdf5 import load_hdf5_set

    small = {subset: subset_lines[:5] for subset, subset_lines in lines.items()}
    summary = bench.write_set(tmp_path / "lines.h5", small, seed=7)
    assert {subset: figures["examples"] for subset, figures in summary.items()} == {"train": 5, "val": 5, "test": 5}
    for subset, subset_lines in small.items():
        loaded = load_hdf5_set(tmp_path / "lines.h5", subset)
        assert loaded.texts == [line.text for line in subset_lines]
        assert loaded.ids == [f"{subset}-{n:05d}" for n in range(5)]
        assert all(np.array_equal(a, line.gray) for a, line in zip(loaded.images, subset_lines))
