"""Batching of variable-size examples (:mod:`tfnhr.data.batches`): greedy pixel-budget batches,
balanced batches of a fixed count, pixel-balanced shards for several workers and their split into
a fixed number of batches, against brute force, closed forms and each other."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfnhr.data.batches import (auto_batch_pixels, balanced_batches, pixel_budget_batches, shard_by_pixels,
                                similar_width_batches, split_into_batches, steps_per_epoch)
from tfnhr.ops.packing import plan_packing


# ----------------------------------------------------------------- pixel_budget_batches

def test_pixel_budget_batches_random_against_greedy_properties():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(0, 15))
        pixels = rng.integers(1, 60, size=n)
        budget = int(rng.integers(1, 120))
        order = rng.permutation(n)[:int(rng.integers(0, n + 1))]  # a subset, in shuffled order
        batches = pixel_budget_batches(pixels, budget, order)
        assert [i for batch in batches for i in batch] == order.tolist()  # once each, order kept
        assert all(batch for batch in batches)
        for batch in batches:
            assert sum(pixels[i] for i in batch) <= budget or len(batch) == 1
        # Greedy: a batch is closed only when the next example would not fit into it.
        for batch, following in zip(batches, batches[1:]):
            assert sum(pixels[i] for i in batch) + pixels[following[0]] > budget


def test_pixel_budget_batches_hand_example_and_errors():
    pixels = [4, 7, 3, 12, 2, 2]
    assert pixel_budget_batches(pixels, 10, range(6)) == [[0], [1, 2], [3], [4, 5]]
    assert pixel_budget_batches(pixels, 10, [5, 4, 0, 1]) == [[5, 4, 0], [1]]
    assert pixel_budget_batches(pixels, 1000, [3, 1]) == [[3, 1]]
    assert pixel_budget_batches(pixels, 10, []) == []
    for budget in (0, -5):
        with pytest.raises(ValueError, match="budget"):
            pixel_budget_batches(pixels, budget, range(6))


# ----------------------------------------------------------------- balanced_batches

def test_balanced_batches_fixed_count_within_budget_and_nearly_equal():
    rng = np.random.default_rng(7)
    for _ in range(300):
        pixels = rng.integers(1, 50, size=int(rng.integers(1, 40)))
        budget = int(2 * pixels.max() + rng.integers(0, 200))
        order = [int(i) for i in rng.permutation(len(pixels))]
        batches = balanced_batches(pixels, budget, order)
        assert len(batches) == steps_per_epoch(pixels, budget) == min(
            -(-int(pixels.sum()) // (budget - int(pixels.max()))), len(pixels))
        assert [i for batch in batches for i in batch] == order  # consecutive, every index once
        sums = [int(pixels[batch].sum()) for batch in batches]
        assert all(batch for batch in batches) and max(sums) <= budget
        assert max(sums) - min(sums) <= 2 * pixels.max()  # nearly equal: within two examples
    with pytest.raises(ValueError, match="must hold two of the largest"):
        balanced_batches([10, 30], 59, [0, 1])


# ----------------------------------------------------------------- shard_by_pixels, split_into_batches

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


# ----------------------------------------------------------------- steps_per_epoch for several workers

@pytest.mark.parametrize("size", [1, 2, 3, 8])
def test_steps_per_epoch_keep_every_batch_within_the_budget(size):
    rng = np.random.default_rng(size)
    pixels = rng.integers(500, 5000, size=200)
    budget = 12_000
    steps = steps_per_epoch(pixels, budget, size)
    for epoch in range(5):
        shards = shard_by_pixels(pixels, size, seed=0, epoch=epoch)
        batches = [split_into_batches(pixels, shard, steps) for shard in shards]
        assert all(len(b) == steps for b in batches)
        assert max(pixels[batch].sum() for rank in batches for batch in rank) <= budget
        assert sorted(i for rank in batches for batch in rank for i in batch) == list(range(len(pixels)))


def test_steps_per_epoch_needs_a_budget_of_two_largest_examples():
    with pytest.raises(ValueError, match="must hold two of the largest"):
        steps_per_epoch([100, 300], 500, 1)


# ----------------------------------------------------------------- similar_width_batches

def _line_sizes(rng, n):
    """Line-like examples: 32 px high, 170-600 px wide (the main job's lines)."""
    widths = rng.integers(170, 600, size=n)
    return widths * 32, widths


def test_similar_width_batches_window_1_is_split_into_batches():
    rng = np.random.default_rng(1)
    pixels, widths = _line_sizes(rng, 50)
    order = rng.permutation(50)
    assert similar_width_batches(pixels, widths, order, 7, 1, [0]) == split_into_batches(pixels, order, 7)


def test_similar_width_batches_partition_count_and_determinism():
    rng = np.random.default_rng(2)
    for _ in range(50):
        n = int(rng.integers(1, 80))
        pixels, widths = _line_sizes(rng, n)
        order = rng.permutation(n)
        n_batches, window = int(rng.integers(1, n + 1)), int(rng.integers(1, 12))
        batches = similar_width_batches(pixels, widths, order, n_batches, window, [3, 4])
        assert len(batches) == n_batches and all(batches)
        assert sorted(i for batch in batches for i in batch) == list(range(n))
        assert batches == similar_width_batches(pixels, widths, order, n_batches, window, [3, 4])
        # every batch comes from one window: its members are within one window of the order
        size = -(-window * n // n_batches)
        window_of = {int(index): position // size for position, index in enumerate(order)}
        assert all(len({window_of[i] for i in batch}) <= 2 for batch in batches)


def test_similar_width_batches_pack_with_less_waste_than_random_batches():
    """The skewed scan's computed cells per valid pixel over an epoch (plan_packing's canvases)."""
    rng = np.random.default_rng(3)
    pixels, widths = _line_sizes(rng, 440)
    order, n_batches = rng.permutation(440), 40

    def waste(batches):
        cells = 0
        for batch in batches:
            layout = plan_packing([(32, int(widths[i])) for i in batch])
            cells += layout.num_canvases * layout.canvas_height * (layout.canvas_width + layout.canvas_height - 1)
        return cells / pixels.sum()

    random_waste = waste(split_into_batches(pixels, order, n_batches))
    sorted_waste = waste(similar_width_batches(pixels, widths, order, n_batches, 8, [0]))
    assert sorted_waste < 0.9 * random_waste
    assert sorted_waste < 1.2  # the skew triangle of 32-px rows alone is ~1.08


def test_similar_width_batches_rejects_a_window_below_one():
    with pytest.raises(ValueError, match="window"):
        similar_width_batches([1, 2], [1, 2], [0, 1], 1, 0, [0])


def test_auto_budget_is_a_dozen_median_examples_or_two_of_the_largest():
    lines = [9_000, 10_000, 11_000, 12_000, 30_000]  # median 11,000
    assert auto_batch_pixels(lines) == 132_000
    assert auto_batch_pixels(lines, examples=4) == 60_000  # 2 x 30,000 beats 4 x 11,000
    assert auto_batch_pixels([100, 300]) == 2_400  # even count: the mean of the middle two
    assert steps_per_epoch(lines, auto_batch_pixels(lines, examples=1)) >= 1  # always a feasible budget
    with pytest.raises(ValueError, match="need examples"):
        auto_batch_pixels([])
