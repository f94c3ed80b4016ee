"""Pixel-balanced shards of variable-size examples and their split into a fixed number of batches
(:mod:`horovod_jobs.sharding`), against brute force, closed forms and the pipeline's batching."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfnhr.data.batches import shard_by_pixels, split_into_batches
from tfnhr.data.batches import balanced_batches, steps_per_epoch

pixel_lists = st.lists(st.integers(1, 10**6), min_size=1, max_size=200)


def totals(pixels, shards) -> list[int]:
    return [sum(pixels[i] for i in shard) for shard in shards]


@settings(max_examples=200, deadline=None)
@given(pixels=pixel_lists, workers=st.integers(1, 8), seed=st.integers(0, 2**32 - 1), epoch=st.integers(0, 1000))
def test_shards_cover_every_example_once_with_totals_within_the_largest_example(pixels, workers, seed, epoch):
    workers = min(workers, len(pixels))
    shards = shard_by_pixels(pixels, workers, seed, epoch)
    assert len(shards) == workers and all(shards)
    assert sorted(i for shard in shards for i in shard) == list(range(len(pixels)))
    assert max(totals(pixels, shards)) - min(totals(pixels, shards)) <= max(pixels)


@settings(max_examples=60, deadline=None)
@given(pixels=st.lists(st.integers(1, 50), min_size=2, max_size=8), workers=st.integers(2, 3),
       seed=st.integers(0, 100))
def test_largest_shard_is_within_lpt_bound_of_the_brute_force_optimum(pixels, workers, seed):
    workers = min(workers, len(pixels))
    optimum = min(max(sum(p for p, w in zip(pixels, owners) if w == k) for k in range(workers))
                  for owners in itertools.product(range(workers), repeat=len(pixels)))
    greedy = max(totals(pixels, shard_by_pixels(pixels, workers, seed, epoch=0)))
    assert greedy * 3 * workers <= (4 * workers - 1) * optimum  # Graham: (4/3 - 1/(3m)) * OPT


def test_two_large_examples_go_to_different_workers_and_small_ones_even_out():
    pixels = [100, 100] + [1] * 10  # equal example counts could give 200 pixels against 10
    shards = shard_by_pixels(pixels, 2, seed=3, epoch=0)
    assert totals(pixels, shards) == [105, 105]
    assert sorted(len(shard) for shard in shards) == [6, 6]


def test_shards_are_deterministic_per_seed_and_epoch_and_keep_the_shuffled_order():
    pixels = np.random.default_rng(0).integers(100, 5000, size=60)
    shards = shard_by_pixels(pixels, 3, seed=7, epoch=4)
    assert shards == shard_by_pixels(pixels, 3, seed=7, epoch=4)
    assert shards != shard_by_pixels(pixels, 3, seed=7, epoch=5)
    assert shards != shard_by_pixels(pixels, 3, seed=8, epoch=4)
    position = {int(i): k for k, i in enumerate(np.random.default_rng([7, 4]).permutation(60))}
    for shard in shards:
        assert [position[i] for i in shard] == sorted(position[i] for i in shard)


def test_one_worker_gets_the_whole_shuffle():
    assert shard_by_pixels([5, 1, 9, 2], 1, seed=1, epoch=2) == [
        [int(i) for i in np.random.default_rng([1, 2]).permutation(4)]]


@pytest.mark.parametrize("pixels, workers, message", [
    ([10, 20], 3, "2 examples cannot fill 3 workers"),
    ([10, 20], 0, "at least one worker"),
    ([10, -1], 2, "non-negative"),
])
def test_shard_errors(pixels, workers, message):
    with pytest.raises(ValueError, match=message):
        shard_by_pixels(pixels, workers, seed=0, epoch=0)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), pixels=pixel_lists)
def test_split_gives_exactly_n_nonempty_batches_covering_the_order(data, pixels):
    order = data.draw(st.permutations(range(len(pixels))))
    n_batches = data.draw(st.integers(1, len(pixels)))
    batches = split_into_batches(pixels, order, n_batches)
    assert len(batches) == n_batches and all(batches)
    assert [i for batch in batches for i in batch] == list(order)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), pixels=st.lists(st.integers(500, 1000), min_size=2, max_size=200))
def test_split_batches_are_within_one_example_of_an_equal_share(data, pixels):
    n_batches = data.draw(st.integers(1, len(pixels) // 2))  # so no example is wider than a share
    order = data.draw(st.permutations(range(len(pixels))))
    total, largest = sum(pixels), max(pixels)
    for batch in split_into_batches(pixels, order, n_batches):
        assert abs(sum(pixels[i] for i in batch) * n_batches - total) < largest * n_batches


@settings(max_examples=100, deadline=None)
@given(data=st.data(), pixels=st.lists(st.integers(1, 1000), min_size=2, max_size=100))
def test_split_matches_the_pipelines_balanced_batches_at_their_count(data, pixels):
    budget = data.draw(st.integers(2 * max(pixels), 2 * sum(pixels)))
    order = data.draw(st.permutations(range(len(pixels))))
    count = steps_per_epoch(pixels, budget)
    if max(pixels) * count <= sum(pixels):  # where balanced_batches needs no repair of empty batches
        assert split_into_batches(pixels, order, count) == balanced_batches(pixels, budget, order)


def test_split_closed_form_and_repair_of_a_wide_example():
    assert split_into_batches([5, 5, 5, 5, 10, 10], range(6), 3) == [[0, 1, 2], [3, 4], [5]]
    # Shares of 103 / 3 pixels: the 100-pixel example would leave the middle batch empty.
    assert split_into_batches([1, 100, 1, 1], range(4), 3) == [[0, 1], [2], [3]]
    # Indices index ``pixels``; the order may be any subset (one worker's shard).
    assert split_into_batches([7, 1, 1, 7], [3, 0], 2) == [[3], [0]]


@pytest.mark.parametrize("n_batches", [0, 4])
def test_split_errors(n_batches):
    with pytest.raises(ValueError, match="non-empty batches"):
        split_into_batches([1, 2, 3], [0, 1, 2], n_batches)
