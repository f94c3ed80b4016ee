"""Python work spread over worker processes, for code that holds the GIL (image rendering, the
beam search): :func:`worker_context` and :func:`ordered_map`.

Workers start from a ``forkserver``: a clean process, not a fork of one that runs TensorFlow's
threads (which may hold locks at the fork), and one that does not import a ``python -m`` main
module again as ``spawn`` would.
"""

from __future__ import annotations

import collections
import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def worker_context() -> multiprocessing.context.BaseContext:
    """The start method of the project's worker processes (``forkserver``)."""
    return multiprocessing.get_context("forkserver")


def _apply(function: Callable[[Item], Result], items: list[Item]) -> list[Result]:
    return [function(item) for item in items]


def ordered_map(function: Callable[[Item], Result], items: Iterable[Item], processes: int,
                chunk: int = 32) -> Iterator[Result]:
    """``function(item)`` of each item, in order; with ``processes`` > 1 computed in that many
    worker processes (``function`` and the items picklable: a module-level function, or a
    ``functools.partial`` of one), ``chunk`` items per task, at most two tasks per process
    ahead of the consumer, so that results wait in memory only a few chunks at a time.
    ``ValueError`` for ``processes`` < 1 at the call, before any item is read."""
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    if processes == 1:
        return map(function, items)
    return _ordered_map_in_workers(function, iter(items), processes, chunk)


def _ordered_map_in_workers(function: Callable[[Item], Result], iterator: Iterator[Item], processes: int,
                            chunk: int) -> Iterator[Result]:
    with ProcessPoolExecutor(processes, mp_context=worker_context()) as executor:
        pending: collections.deque[Future] = collections.deque()
        while True:
            while len(pending) < 2 * processes and (block := [item for _, item in zip(range(chunk), iterator)]):
                pending.append(executor.submit(_apply, function, block))
            if not pending:
                return
            yield from pending.popleft().result()
