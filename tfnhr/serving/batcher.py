"""Dynamic batching: many request threads, one worker thread that owns the model.

Request threads :meth:`Batcher.submit` items and wait on the returned futures. The worker takes
the oldest item, then keeps collecting items for up to ``max_wait_s`` (seconds) while their
summed size stays within ``budget`` (for images: pixels), and hands the whole list to ONE call
of ``run_batch``. Results go back to the futures in order. The batcher knows nothing about
models or HTTP: ``run_batch`` is any callable ``list[item] -> list[result]``.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


RECENT_WEIGHT = 0.2
"""The newest batch's weight in :attr:`Batcher.seconds_per_item`."""


class BatcherClosed(RuntimeError):
    """:meth:`Batcher.submit` after :meth:`Batcher.close`."""


@dataclasses.dataclass
class _Job:
    item: object
    size: int
    future: Future


class Batcher(Generic[Item, Result]):
    """A queue plus one worker thread running ``run_batch`` on batches of queued items.

    ``size(item)`` is an item's share of the ``budget`` (for images: pixels). A batch holds the
    oldest waiting item plus the items that arrive within ``max_wait_s`` seconds after the
    worker took it, as long as the sizes fit the budget; an item alone larger than the budget
    is a batch of its own. ``max_wait_s = 0``: no waiting, only items already queued join.
    If ``run_batch`` raises, or returns a wrong number of results, every future of that batch
    gets the exception and the worker carries on with the next batch.
    """

    def __init__(self, run_batch: Callable[[list[Item]], Sequence[Result]], size: Callable[[Item], int],
                 budget: int, max_wait_s: float, name: str = "batcher") -> None:
        if budget < 1:
            raise ValueError(f"the batch budget must be positive, got {budget}")
        if max_wait_s < 0:
            raise ValueError(f"the wait window must not be negative, got {max_wait_s}")
        self._run_batch, self._size = run_batch, size
        self.budget, self.max_wait_s = int(budget), float(max_wait_s)
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._carry: _Job | None = None  # taken from the queue but did not fit the last batch
        self._lock = threading.Lock()
        self._closed = False
        self._waiting = self._items = self._batches = 0
        self._seconds_per_item = 0.0
        self._worker = threading.Thread(target=self._work, name=name, daemon=True)
        self._worker.start()

    def submit(self, item: Item) -> Future[Result]:
        """Queue ``item``; the future resolves to its result (or raises the batch's error).
        :class:`BatcherClosed` once :meth:`close` was called."""
        job = _Job(item, int(self._size(item)), Future())
        with self._lock:
            if self._closed:
                raise BatcherClosed("the batcher is shutting down")
            self._waiting += 1
            self._queue.put(job)
        return job.future

    def close(self) -> None:
        """Stop taking items, let the worker finish every queued item, and wait for it."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._queue.put(None)
        self._worker.join()

    def __enter__(self) -> "Batcher[Item, Result]":
        return self

    def __exit__(self, *_) -> None:
        self.close()

    @property
    def queue_length(self) -> int:
        """Items submitted but not yet in a running batch."""
        return self._waiting

    @property
    def items_done(self) -> int:
        """Items whose batch has finished (with results or an error)."""
        return self._items

    @property
    def seconds_per_item(self) -> float:
        """Recent seconds of ``run_batch`` per item (a moving average over batches, weight
        :data:`RECENT_WEIGHT` on the newest); 0 before the first batch."""
        return self._seconds_per_item

    @property
    def batches_run(self) -> int:
        """Calls of ``run_batch`` so far."""
        return self._batches

    def _work(self) -> None:
        stopping = False
        while not stopping:
            batch, stopping = self._collect()
            if batch:
                self._run(batch)

    def _collect(self) -> tuple[list[_Job], bool]:
        """The next batch, and whether the stop mark was reached."""
        first, self._carry = self._carry or self._queue.get(), None
        if first is None:
            return [], True
        batch, filled = [first], first.size
        deadline = time.monotonic() + self.max_wait_s
        stopping = False
        while filled < self.budget:
            try:
                job = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if job is None:
                stopping = True
                break
            if filled + job.size > self.budget:
                self._carry = job
                break
            batch.append(job)
            filled += job.size
        with self._lock:
            self._waiting -= len(batch)
        return batch, stopping

    def _run(self, batch: list[_Job]) -> None:
        started = time.perf_counter()
        try:
            results = list(self._run_batch([job.item for job in batch]))
            if len(results) != len(batch):
                raise RuntimeError(f"the batch function returned {len(results)} results for {len(batch)} items")
        except Exception as error:  # noqa: BLE001  (the error belongs to the requests of this batch)
            for job in batch:
                job.future.set_exception(error)
        else:
            for job, result in zip(batch, results):
                job.future.set_result(result)
        per_item = (time.perf_counter() - started) / len(batch)
        with self._lock:
            self._seconds_per_item = (per_item if not self._batches else
                                      RECENT_WEIGHT * per_item + (1 - RECENT_WEIGHT) * self._seconds_per_item)
            self._items += len(batch)
            self._batches += 1
