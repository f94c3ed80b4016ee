"""Lane placement over the devices of several processes: the MLCN model parallel across Horovod
ranks and hosts (Rosario et al. 2019, §IV-B "mlcn-model" and Fig. 8, lanes over four machines).

A *slot* is one device of one rank (:class:`Slot`). A placement over slots is a list: entry ``l``
is the index, into the slot list, of lane ``l``'s slot. Costs and speeds have the units of
:mod:`capsnet.placement` (``width² · depth`` or seconds; speeds dimensionless, slowest 1.0), and
the strategies are its :data:`~capsnet.placement.STRATEGIES`. Nothing here talks to other
processes: ``horovod_jobs.model_parallel`` gathers the slots of every rank and hands them over.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence

from capsnet.lanes import Lane, as_lane
from capsnet.placement import device_loads, lane_cost, partition


@dataclasses.dataclass(frozen=True)
class Slot:
    """Device ``device`` (canonical, e.g. ``/device:GPU:1``) of rank ``rank`` on host ``host``."""

    rank: int
    host: str
    device: str

    def __str__(self) -> str:
        return f"rank {self.rank} {self.device}"


def place_on_slots(lanes: Sequence, slots: Sequence[Slot], strategy: str = "greedy",
                   speeds: Sequence[float] | None = None, costs: Sequence[float] | None = None,
                   seed: int | None = 0) -> list[int]:
    """The slot index of each lane: :func:`capsnet.placement.partition` of the lanes' ``costs``
    (default :func:`~capsnet.placement.lane_cost`) over the slots' ``speeds`` (default 1.0 each).

    Every rank must get at least one lane: a rank without one would hold no weights and only wait
    for the others, so ``ValueError`` names it and the fix. A device of a rank that has lanes on
    another of its devices may stay idle (a warning names it).
    """
    lanes = [as_lane(lane) for lane in lanes]
    if not slots:
        raise ValueError("no slots: every rank offers at least one device")
    cost_list = [lane_cost(lane) for lane in lanes] if costs is None else list(costs)
    speed_list = [1.0] * len(slots) if speeds is None else list(speeds)
    if len(cost_list) != len(lanes) or len(speed_list) != len(slots):
        raise ValueError(f"{len(cost_list)} costs for {len(lanes)} lanes, {len(speed_list)} speeds for {len(slots)} slots")
    assignment = partition(strategy, cost_list, speed_list, seed)
    ranks = sorted({slot.rank for slot in slots})
    busy_ranks = {slots[index].rank for index in assignment}
    empty = [rank for rank in ranks if rank not in busy_ranks]
    if empty:
        hint = (f"{len(lanes)} lanes cannot occupy {len(ranks)} ranks: start fewer ranks per model "
                "(horovodrun -np, or more --data-groups) or use more lanes"
                if len(lanes) < len(ranks) else
                "the strategy left them without a lane (a slow rank under greedy, or a random draw): "
                "try --placement round_robin, another --seed, or fewer ranks per model")
        raise ValueError(f"rank(s) {', '.join(map(str, empty))} get no lane; {hint}")
    idle = [str(slot) for index, slot in enumerate(slots) if index not in assignment]
    if idle:
        warnings.warn(f"{len(idle)} of {len(slots)} devices get no lane and stay idle: {', '.join(idle)}")
    return assignment


def format_slot_table(lanes: Sequence, slots: Sequence[Slot], assignment: Sequence[int],
                      speeds: Sequence[float] | None = None, costs: Sequence[float] | None = None) -> str:
    """A text table, one row per slot: rank, host, device, speed, its lanes (``index:WxD``) and its
    predicted load (sum of its lanes' costs / speed), then the makespan line."""
    lanes = [as_lane(lane) for lane in lanes]
    cost_list = [lane_cost(lane) for lane in lanes] if costs is None else list(costs)
    speed_list = [1.0] * len(slots) if speeds is None else list(speeds)
    loads = device_loads(cost_list, assignment, speed_list)
    header = ("rank", "host", "device", "speed", "lanes", "predicted load")
    rows = [(str(slot.rank), slot.host, slot.device, f"{speed_list[index]:.4g}",
             " ".join(f"{lane}:{lanes[lane]}" for lane, where in enumerate(assignment) if where == index) or "-",
             f"{loads[index]:.4g}")
            for index, slot in enumerate(slots)]
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]
    busiest = max(range(len(slots)), key=loads.__getitem__)
    lines.append(f"makespan: {loads[busiest]:.6g} ({slots[busiest]})")
    return "\n".join(lines)


def slot_placement_record(lanes: Sequence[Lane], slots: Sequence[Slot], assignment: Sequence[int]) -> dict:
    """JSON-able ``{"lane index": {"lane": "WxD", "rank", "host", "device"}}``, lanes in order."""
    return {str(lane): {"lane": str(as_lane(spec)), **dataclasses.asdict(slots[assignment[lane]])}
            for lane, spec in enumerate(lanes)}
