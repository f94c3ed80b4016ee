"""Decodings spread over worker processes: the beam search is Python (pyctcdecode), one core per
process, so reading many lines (``tfnhr evaluate``, the main job's 24 views) decodes on every core.

The workers start as :func:`tfnhr.runtime.parallel.worker_context` starts them (a ``forkserver``). Each
builds its own decoder once from the arguments it was made with (its LM loaded in each process)
and decodes what :meth:`DecodingPool.map` hands out, in order.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from tfnhr.runtime.parallel import worker_context

_worker_decode: Callable[[np.ndarray], str] | None = None
"""In a worker process: its decoder's ``decode``."""

CHUNKS_PER_PROCESS = 4
"""Work handed out per process and call (chunks of scores): a few, so that a process that gets
the long lines does not leave the others idle at the end."""


def _start_worker(factory: Callable[..., Any], arguments: Mapping[str, Any]) -> None:
    global _worker_decode
    _worker_decode = factory(**arguments).decode


def _decode_in_worker(scores: np.ndarray) -> str:
    assert _worker_decode is not None, "the pool's initializer has not run"
    return _worker_decode(scores)


class DecodingPool:
    """``processes`` worker processes, each with the decoder ``factory(**arguments)`` (a class or
    function importable by name, arguments picklable). Started at the first :meth:`map` and shut
    down by :meth:`close` or when the pool is garbage-collected.
    """

    def __init__(self, processes: int, factory: Callable[..., Any], arguments: Mapping[str, Any]) -> None:
        if processes < 2:
            raise ValueError(f"a decoding pool needs at least 2 processes, got {processes}")
        self.processes = processes
        self._factory = factory
        self._arguments = dict(arguments)
        self._executor: ProcessPoolExecutor | None = None
        self._finalizer: weakref.finalize | None = None

    def map(self, scores_list: Sequence[np.ndarray]) -> list[str]:
        """The workers' ``decode`` of each ``[T_i, C]`` array, in order."""
        if self._executor is None:
            self._executor = ProcessPoolExecutor(self.processes, mp_context=worker_context(),
                                                 initializer=_start_worker, initargs=(self._factory, self._arguments))
            self._finalizer = weakref.finalize(self, self._executor.shutdown, cancel_futures=True)
        chunk = max(1, math.ceil(len(scores_list) / (CHUNKS_PER_PROCESS * self.processes)))
        return list(self._executor.map(_decode_in_worker, scores_list, chunksize=chunk))

    def close(self) -> None:
        """Stop the workers (a later :meth:`map` starts new ones)."""
        if self._finalizer is not None:
            self._finalizer()
        self._executor = self._finalizer = None
