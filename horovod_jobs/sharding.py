"""Per-worker shards of a list of variable-size examples, and their split into batches.

Seed ``no-padding-please-mdlstm-nhr.txt`` §IV-C: the example list is split into sub-lists of
nearly equal *pixel* totals (not equal example counts), one per worker, so that workers finish
their steps at about the same time. Synchronous training also needs every worker to take the
same number of steps per epoch: the workers agree on one count
(:func:`horovod_jobs.distributed.agreed_batch_count`) and each splits its shard into exactly that
many batches with :func:`split_into_batches`.

Pure NumPy; no Horovod here, so every function is the same on every rank and testable in one
process.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np


def shard_by_pixels(pixels: Sequence[int], n_workers: int, seed: int, epoch: int) -> list[list[int]]:
    """Split example indices ``0..N-1`` into ``n_workers`` shards of nearly equal pixel totals.

    The indices are shuffled by ``np.random.default_rng([seed, epoch])`` (the same on every
    rank, different every epoch), then dealt largest first (stable on the shuffled order) to the
    worker whose pixel total is smallest so far (ties: the lowest worker number). This is
    Graham's LPT rule: the largest shard total is at most ``4/3 - 1/(3 n_workers)`` times the
    best possible, and **max total - min total <= the largest single example's pixels** (each
    example goes to the currently smallest shard, so a gap can only come from one example).
    Each shard keeps the shuffled order, so its batches differ from epoch to epoch.

    Args:
      pixels: pixel count of each example, ``[N]`` non-negative ints.
      n_workers: number of shards (workers), ``1 <= n_workers <= N``.
      seed, epoch: select the shuffle.

    Returns:
      ``n_workers`` lists of example indices; every index in ``0..N-1`` occurs in exactly one.

    Raises:
      ValueError: ``n_workers < 1``, fewer examples than workers (a worker would get no data),
        or a negative pixel count.
    """
    sizes = np.asarray(pixels, dtype=np.int64)
    if n_workers < 1:
        raise ValueError(f"need at least one worker, got n_workers={n_workers}")
    if len(sizes) < n_workers:
        raise ValueError(f"{len(sizes)} examples cannot fill {n_workers} workers: every worker needs at "
                         "least one example per epoch (use fewer workers or more data)")
    if (sizes < 0).any():
        raise ValueError("pixel counts must be non-negative")
    shuffled = np.random.default_rng([seed, epoch]).permutation(len(sizes))
    largest_first = np.argsort(-sizes[shuffled], kind="stable")  # positions in the shuffled order
    owner = np.empty(len(sizes), dtype=np.int64)
    totals = [(0, worker) for worker in range(n_workers)]  # a min-heap of (pixel total, worker)
    for position in largest_first:
        total, worker = heapq.heappop(totals)
        owner[position] = worker
        heapq.heappush(totals, (total + int(sizes[shuffled[position]]), worker))
    return [[int(i) for i in shuffled[owner == worker]] for worker in range(n_workers)]


def split_into_batches(pixels: Sequence[int], order: Sequence[int], n_batches: int) -> list[list[int]]:
    """Split ``order`` (example indices) into exactly ``n_batches`` consecutive, non-empty batches
    of nearly equal pixel sums.

    Batch ``b`` takes the examples whose pixel range in ``order`` starts in
    ``[b, b + 1) * total / n_batches`` (at most ``total / n_batches + largest`` pixels, the rule
    of :func:`tfnhr.data.pipeline.balanced_batches`, which picks its own count from a pixel
    budget instead); where that would leave a batch empty (examples wider than
    ``total / n_batches``), cut points move by the fewest examples needed to give every batch one.

    Args:
      pixels: pixel count of each example, indexed by the values in ``order`` (``[N]``, any N).
      order: the example indices to split, in order (e.g. one worker's shard).
      n_batches: how many batches, ``1 <= n_batches <= len(order)``.

    Returns:
      ``n_batches`` lists of indices whose concatenation is ``order``.

    Raises:
      ValueError: ``n_batches`` outside ``1..len(order)``.
    """
    order = np.asarray(order, dtype=np.int64)
    if not 1 <= n_batches <= len(order):
        raise ValueError(f"cannot split {len(order)} examples into {n_batches} non-empty batches: the "
                         "workers agreed on more steps than this worker has examples (raise the pixel "
                         "budget or use fewer workers)")
    sizes = np.asarray(pixels, dtype=np.int64)[order]
    starts = np.cumsum(sizes) - sizes  # pixels before each example, [len(order)]
    later = np.arange(1, n_batches)
    # Cut b (b = 1..n-1) at the first example starting at or after b * total / n (integer test).
    cuts = np.searchsorted(starts * n_batches, later * int(sizes.sum()), side="left")
    # Non-empty batches <=> 1 <= cut_1 < cut_2 < ... < len: make cut_b - b non-decreasing from 0
    # and at most len - n.
    slack = np.maximum.accumulate(np.concatenate([[0], cuts - later]))[1:]
    cuts = np.minimum(slack, len(order) - n_batches) + later
    return [[int(i) for i in batch] for batch in np.split(order, cuts)]
