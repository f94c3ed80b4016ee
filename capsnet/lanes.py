"""Lane specifications of a Multi-Lane CapsNet (MLCN): a lane's width and depth.

A lane of width ``w`` and depth ``d`` is ``d`` convolution stages of ``16·w`` filters followed by
primary capsules of ``16·w`` channels (``2·w`` capsules of 8 dimensions per position); see
``capsnet.models.LaneBlock``. Its cost in the model of Rosario et al. 2019 (Eq. 1) is ``w² · d``.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence


@dataclasses.dataclass(frozen=True)
class Lane:
    """One lane: ``width`` scales the filter counts (16·width), ``depth`` counts conv stages."""

    width: int
    depth: int

    def __post_init__(self):
        for field in ("width", "depth"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"lane {field} must be a positive int, got {value!r}")

    def to_config(self) -> dict:
        return {"width": self.width, "depth": self.depth}

    def __str__(self) -> str:
        return f"{self.width}x{self.depth}"


def as_lane(spec) -> Lane:
    """A ``Lane``, a ``{"width", "depth"}`` dict, a ``(width, depth)`` pair or ``"WxD"`` -> ``Lane``."""
    if isinstance(spec, Lane):
        return spec
    if isinstance(spec, dict):
        return Lane(**spec)
    if isinstance(spec, str):
        parts = spec.lower().split("x")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"lane spec must look like WIDTHxDEPTH (e.g. 4x1), got {spec!r}")
        return Lane(int(parts[0]), int(parts[1]))
    if isinstance(spec, Sequence) and len(spec) == 2:
        return Lane(*spec)
    raise ValueError(f"cannot read a lane from {spec!r}: use Lane(width, depth), (width, depth) or 'WxD'")


def parse_lanes(text: str) -> list[Lane]:
    """``"4x1,4x1,2x3"`` -> three lanes (width x depth), in order."""
    specs = [s for s in text.replace(" ", "").split(",") if s]
    if not specs:
        raise ValueError("no lanes given: expected a comma-separated list like 4x1,2x3")
    return [as_lane(s) for s in specs]


def uniform_lanes(count: int, width: int, depth: int) -> list[Lane]:
    """``count`` equal lanes of ``width`` and ``depth``."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"the number of lanes must be a positive int, got {count!r}")
    return [Lane(width, depth)] * count


def lane_list(lane_spec: str | None, count: int, width: int, depth: int) -> list[Lane]:
    """The lanes of a spec such as ``"4x1,2x3"`` (:func:`parse_lanes`), or without one ``count``
    equal lanes (:func:`uniform_lanes`); ``ValueError`` for a bad spec."""
    return parse_lanes(lane_spec) if lane_spec is not None else uniform_lanes(count, width, depth)
