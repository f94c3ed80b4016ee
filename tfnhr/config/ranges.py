"""The allowed ranges of numeric settings, shared by the command lines (checked while parsing,
before any work) and the option classes (checked for config files and Python callers).
TensorFlow-free.

A :class:`Range` checks one number; :func:`each` parses and :func:`check_each` checks every number
of a tuple. The training options declare their ranges with the options themselves
(:mod:`tfnhr.config.train_options`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class Range:
    """Numbers from ``low`` to ``high`` (``None``: unbounded), each end included unless
    ``low_open``/``high_open``; integers only if ``integer``; ``none`` also allows ``None``
    (written ``none`` on a command line)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    none: bool = False

    def describe(self) -> str:
        """In words, e.g. ``"an integer >= 1"``, ``"a number in [0, 1)"``."""
        kind = "an integer" if self.integer else "a number"
        if self.low is not None and self.high is not None:
            text = f"{kind} in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        elif self.low is not None:
            text = f"{kind} {'>' if self.low_open else '>='} {self.low:g}"
        elif self.high is not None:
            text = f"{kind} {'<' if self.high_open else '<='} {self.high:g}"
        else:
            text = kind
        return text + (" or none" if self.none else "")

    def holds(self, value: object) -> bool:
        """Whether ``value`` is in the range."""
        if value is None:
            return self.none
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            return False
        if self.integer and int(value) != value:
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def check(self, name: str, value: object) -> object:
        """``value`` if it is in the range; else ``ValueError`` naming ``name``."""
        if not self.holds(value):
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}")
        return value

    def parse(self, text: str) -> int | float | None:
        """A command-line value in the range (argparse ``type``): ``ArgumentTypeError`` otherwise."""
        if self.none and text.strip().lower() == "none":
            return None
        try:
            value = int(text) if self.integer else float(text)
        except ValueError:
            value = None
        if value is None or not self.holds(value):
            raise argparse.ArgumentTypeError(f"expected {self.describe()}, got {text!r}")
        return value

    @property
    def type(self) -> Callable[[str], int | float | None]:
        """:meth:`parse`, for ``add_argument(type=...)``."""
        return self.parse


def each(range_: Range) -> Callable[[str], tuple]:
    """argparse ``type`` of a comma-separated list whose every number is in ``range_``
    (``"2,10,50"`` -> ``(2, 10, 50)``)."""

    def parse(text: str) -> tuple:
        return tuple(range_.parse(part) for part in text.split(","))

    return parse


def check_each(name: str, values: tuple | None, range_: Range) -> None:
    """``ValueError`` naming ``name`` unless every number of ``values`` (if any) is in ``range_``."""
    for value in values or ():
        if not range_.holds(value):
            raise ValueError(f"every {name} must be {range_.describe()}, got {tuple(values)!r}")


COUNT = Range(1, integer=True)
"""A positive count (epochs, pixels, samples, units, ...)."""
NONNEGATIVE_COUNT = Range(0, integer=True)
"""Zero or more (seeds, lines to show)."""
POSITIVE = Range(0, low_open=True)
"""A positive number (learning rate, minutes, seconds)."""
NONNEGATIVE = Range(0)
"""Zero or more (a wait)."""
PORT = Range(0, 65535, integer=True)
"""A TCP port; 0 lets the system choose a free one."""
WIDTH_FACTOR = Range(0.1, 10)
"""A factor of an image's width (the width ensemble's ``--widths``)."""
SHEAR = Range(-1, 1)
"""A shear of a line image, px of horizontal shift per px of height (the width ensemble's ``--shears``)."""
PROBABILITY_BELOW_ONE = Range(0, 1, high_open=True)
"""Dropout and similar rates: 1 would drop everything."""
