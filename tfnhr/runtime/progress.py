"""Progress of long loops (reading, converting, rendering, dumping), on stderr.

On a terminal, one line redrawn in place at most 5 times a second; into a log file (not a
terminal), a plain line when the work is done and, while it lasts, at most one per tenth of the
work and per :data:`LOG_INTERVAL` seconds, so logs stay readable.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

LOG_INTERVAL = 10.0
"""Least seconds between two progress lines in a log file (the last line always comes)."""


class Progress:
    """Counts ``total`` items of work called ``what`` (e.g. ``"train data"``), in ``unit``\\s.

    ``enabled=False`` (or ``total == 0``) shows nothing. Call :meth:`step` per item or
    :meth:`update` with the number done so far.
    """

    def __init__(self, total: int, what: str, unit: str = "images", enabled: bool = True,
                 stream: TextIO | None = None, clock: Callable[[], float] = time.perf_counter) -> None:
        self.total, self.what, self.unit = total, what, unit
        self.enabled = enabled and total > 0
        self.stream = stream or sys.stderr
        self.clock = clock
        self.done = 0
        self.started = self.shown = clock()
        self.tenths_shown = 0

    def step(self, count: int = 1) -> None:
        """``count`` more items done."""
        self.update(self.done + count)

    def update(self, done: int) -> None:
        """``done`` items done in all."""
        self.done = done
        if not self.enabled:
            return
        now = self.clock()
        finished = done >= self.total
        rate = done / max(now - self.started, 1e-9)
        if self.stream.isatty():
            if now - self.shown > 0.2 or finished:
                self.shown = now
                bar = "=" * (30 * done // self.total)
                self.stream.write(f"\r{self.what} {done}/{self.total} [{bar:<30}] {rate:.0f} {self.unit}/s")
                if finished:
                    self.stream.write("\n")
                self.stream.flush()
            return
        tenths = 10 * done // self.total
        if tenths > self.tenths_shown and (finished or now - self.shown >= LOG_INTERVAL):
            self.tenths_shown, self.shown = tenths, now
            self.stream.write(f"{self.what}: {done}/{self.total} {self.unit} ({100 * done // self.total}%), "
                              f"{rate:.0f} {self.unit}/s, {now - self.started:.0f} s\n")
            self.stream.flush()
