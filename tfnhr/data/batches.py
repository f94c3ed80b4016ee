"""Which examples go together: batches under a pixel budget and per-worker shards (NumPy only).

Variable-size examples are batched by their *pixels*, not by their count (Wenniger et al. 2019,
§IV): big images make small batches, small ones large batches, and the packed canvases stay
about the same size.

* :func:`pixel_budget_batches` (inference) fills each batch up to the budget in the given order.
* :func:`split_into_batches` cuts an order into a given number of batches of nearly equal pixel
  sums; :func:`balanced_batches` (training) does it at :func:`steps_per_epoch`'s count, so every
  epoch has the same number of steps whatever the shuffle (Keras counts an epoch's steps from the
  first one and would otherwise drop batches or stop early).
* :func:`shard_by_pixels` splits the examples over workers with nearly equal pixel totals
  (Wenniger et al. 2019, §IV-C), so that workers finish their steps at about the same time; each
  worker splits its shard with :func:`split_into_batches` into the :func:`steps_per_epoch` that
  all workers share.

* :func:`similar_width_batches` (training) is :func:`split_into_batches` on an order whose
  windows of ``window`` batches' worth of examples are each sorted by width, the batches then
  shuffled: a batch holds lines of similar widths, so its packed canvases (as wide as its widest
  line) waste fewer cells and scan fewer columns, while every epoch still mixes all widths.

Every function is deterministic and the same on every rank: one implementation serves one
process and a Horovod job.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from tfnhr.config.options import OptionError


def pixel_budget_batches(pixels: Sequence[int], budget: int, order: Sequence[int]) -> list[list[int]]:
    """Split ``order`` (example indices) into consecutive batches of at most ``budget`` pixels.

    An example larger than the budget forms a batch of its own. Every index appears once.
    """
    if budget < 1:
        raise ValueError(f"the pixel budget must be positive, got {budget}")
    batches, current, filled = [], [], 0
    for index in order:
        size = int(pixels[index])
        if current and filled + size > budget:
            batches.append(current)
            current, filled = [], 0
        current.append(int(index))
        filled += size
    if current:
        batches.append(current)
    return batches


AUTO_BATCH_EXAMPLES = 12
"""Examples of median size in a batch of :func:`auto_batch_pixels`' budget."""


def auto_batch_pixels(pixels: Sequence[int], examples: int = AUTO_BATCH_EXAMPLES) -> int:
    """A training batch's pixel budget for examples of ``pixels`` pixels each: ``examples`` of the
    median size, and never less than two of the largest (what :func:`steps_per_epoch` needs).

    Why a count of examples rather than a fixed budget: more updates of fewer lines learned faster
    at a time limit than fewer of more lines at the same lines per second (docs/lab/digit-lines.md,
    docs/lab/main-job.md), and a fixed budget is many short lines or a few long ones."""
    if len(pixels) == 0 or examples < 1:
        raise ValueError(f"need examples and a positive count, got {len(pixels)} examples and {examples}")
    return int(max(examples * np.median(pixels), 2 * np.max(pixels)))


def steps_per_epoch(pixels: Sequence[int], budget: int, workers: int = 1) -> int:
    """Batches per worker and epoch that keep every batch within ``budget`` pixels, the same for
    every worker and epoch: ``min(ceil((total + (workers - 1) · largest) / (workers · (budget -
    largest))), N)``.

    :func:`shard_by_pixels` keeps every shard within ``(total + (workers - 1) · largest) /
    workers`` pixels (its shards differ by at most the largest example; one worker's shard is
    everything), and :func:`split_into_batches` makes batches of at most ``shard / n + largest``
    pixels, so each batch stays within the budget. Never more batches than examples.

    Raises :class:`~tfnhr.config.options.OptionError` unless the budget holds two of the largest example."""
    largest, total = int(max(pixels)), int(sum(pixels))
    if budget < 2 * largest:
        raise OptionError("the pixel budget {budget} must hold two of the largest example ({largest} pixels): "
                          "raise the budget ({batch_pixels}) or scale the images down ({height})",
                          budget=budget, largest=largest,
                          batch_pixels=("batch_pixels", "--batch-pixels"), height=("height", "--height"))
    return min(-(-(total + (workers - 1) * largest) // (workers * (budget - largest))), len(pixels))


def balanced_batches(pixels: Sequence[int], budget: int, order: Sequence[int], widths: Sequence[int] | None = None,
                     window: int = 1, seed: Sequence[int] = ()) -> list[list[int]]:
    """Split ``order`` (every example index once) into exactly :func:`steps_per_epoch` batches of
    nearly equal pixel sums, each at most ``budget``: :func:`split_into_batches`, or with
    ``window > 1`` :func:`similar_width_batches` (``widths``, ``window``, ``seed`` as there)."""
    if len(order) != len(pixels):
        raise ValueError(f"the order has {len(order)} indices for {len(pixels)} examples")
    return similar_width_batches(pixels, widths, order, steps_per_epoch(pixels, budget), window, seed)


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
    ``[b, b + 1) * total / n_batches`` (at most ``total / n_batches + largest`` pixels); where
    that would leave a batch empty (examples wider than ``total / n_batches``), cut points move
    by the fewest examples needed to give every batch one.

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


def similar_width_batches(pixels: Sequence[int], widths: Sequence[int], order: Sequence[int], n_batches: int,
                          window: int, seed: Sequence[int]) -> list[list[int]]:
    """:func:`split_into_batches` of ``order`` into ``n_batches`` batches of similar widths.

    ``order`` is cut into consecutive windows of ``ceil(window * len(order) / n_batches)``
    examples (``window`` batches' worth); each window is sorted by width (stable), the sorted
    order is split into batches of nearly equal pixel sums, and the batches are shuffled by
    ``np.random.default_rng(seed)``. ``window=1`` returns exactly ``split_into_batches(pixels,
    order, n_batches)`` (no sorting, no shuffle).

    Why: a packed batch is as wide as its widest line, so a batch of random lines scans
    ``widest / mean`` times the columns it needs. On synthetic lines 32 px high and 176-600 px
    wide the skewed scan computes 1.36 cells per valid pixel with random batches of 11 lines,
    1.15 with ``window=8`` and 1.09 with the whole epoch sorted (docs/lab/throughput.md).

    Args:
      pixels, widths: pixel count and width of each example, indexed by the values in ``order``.
      order, n_batches: as in :func:`split_into_batches`.
      window: batches per sorting window, ``>= 1``.
      seed: seeds the shuffle of the batches (e.g. ``[seed, epoch]``).
    """
    if window < 1:
        raise ValueError(f"the sorting window must be at least 1 batch, got {window}")
    order = np.asarray(order, dtype=np.int64)
    if window == 1:
        return split_into_batches(pixels, order, n_batches)
    size = max(1, -(-window * len(order) // max(n_batches, 1)))
    widths = np.asarray(widths, dtype=np.int64)
    windows = [part[np.argsort(widths[part], kind="stable")] for part in np.split(order, range(size, len(order), size))]
    batches = split_into_batches(pixels, np.concatenate(windows), n_batches)
    return [batches[i] for i in np.random.default_rng(seed).permutation(len(batches))]
