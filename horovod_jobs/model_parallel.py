"""A Multi-Lane CapsNet whose lanes are spread over Horovod ranks and hosts: Rosario et al. 2019's
"mlcn-model" (§IV-B, Fig. 8), across machines with Horovod collectives.

Layout (:class:`RankGroups`): the ``size`` ranks form ``groups`` model-parallel replicas of
``size / groups`` consecutive ranks each; data parallel between the replicas (``--data-groups``).
Inside a replica, rank ``p`` (its *position*) owns the lanes that the placement gives it and holds
only their weights; the capsule assembly, decoder and losses are replicated on every rank.

One training step, on every rank of a replica (all on the same batch):

1. the rank computes its lanes' outputs ``[L_rank, B, K]`` on its own device(s);
2. one ``allgather`` inside the replica gives every rank all ``[L, B, K]`` (variable-size lane
   groups), put in lane order and assembled into the class capsules ``[B, K, L]``;
3. loss, decoder and its gradient are computed identically on every rank; the gradient of the
   gathered lane outputs is therefore already on every rank, and each keeps the rows of its own
   lanes (the allgather's gradient is this slice: no communication backwards);
4. the gradients of the replicated weights are averaged over all ranks (one grouped allreduce:
   replicas see different batches, and ranks on different hardware would round differently), and
   with several replicas each lane's gradients are averaged over the ranks that hold that lane.

Initial weights equal those of ``capsnet train --seed S``: every rank constructs every lane (a
Keras layer draws its initializer seeds when constructed) but builds only its own, and the
replicated weights are broadcast from rank 0. ``model.keras`` is one ordinary MLCN: rank 0
gathers every lane's weights and optimizer state (:func:`gather_full_model`); ``--resume`` gives
each rank its part of it back.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Sequence

import horovod.tensorflow as hvd
import keras
import tensorflow as tf

from capsnet.devices import parse_devices
from capsnet.models import MultiLaneCapsNet, device_scope
from capsnet.placement import lane_costs, probe_device_seconds, speed_map, speeds_from_seconds
from capsnet.rank_placement import Slot, format_slot_table, place_on_slots, slot_placement_record
from capsnet.state import restore_training_state, training_state
from capsnet.training import Setup, TrainConfig, saved_state
from horovod_jobs.distributed import DYNAMIC_PROCESS_SETS, check_same_config

@dataclasses.dataclass(frozen=True)
class RankGroups:
    """``size`` ranks in ``groups`` replicas of consecutive ranks; this is rank ``rank``."""

    rank: int
    size: int
    groups: int = 1

    def __post_init__(self) -> None:
        if self.groups < 1 or self.size % self.groups:
            raise ValueError(f"--data-groups {self.groups} must divide the {self.size} ranks into equal "
                             f"model-parallel replicas (e.g. -np {self.size} with --data-groups "
                             f"{' or '.join(str(g) for g in range(1, self.size + 1) if self.size % g == 0)})")

    @property
    def group_size(self) -> int:
        """Ranks per replica: the ranks one model is spread over."""
        return self.size // self.groups

    @property
    def group(self) -> int:
        """This rank's replica, ``0..groups-1``."""
        return self.rank // self.group_size

    @property
    def position(self) -> int:
        """This rank's place in its replica, ``0..group_size-1`` (the slots' ``rank``)."""
        return self.rank % self.group_size

    def group_ranks(self, group: int) -> list[int]:
        return list(range(group * self.group_size, (group + 1) * self.group_size))

    def peer_ranks(self, position: int) -> list[int]:
        """The ranks at ``position`` in every replica: they hold the same lanes."""
        return [group * self.group_size + position for group in range(self.groups)]


@dataclasses.dataclass(frozen=True)
class ProcessSets:
    """Horovod process sets of this rank: ``group`` (its replica; ``None`` for a replica of one
    rank) and ``peers`` (its peers holding the same lanes; ``None`` with one replica)."""

    group: hvd.ProcessSet | None
    peers: hvd.ProcessSet | None


def make_process_sets(layout: RankGroups) -> ProcessSets:
    """Register (collectively, same order on every rank) the replicas' and the peers' process sets.
    The whole world is Horovod's global set; sets of one rank are not needed (``None``)."""

    def process_set(ranks: list[int]) -> hvd.ProcessSet | None:
        if len(ranks) == 1:
            return None
        if len(ranks) == layout.size:
            return hvd.global_process_set
        if os.environ.get(DYNAMIC_PROCESS_SETS) != "1":
            raise RuntimeError(f"replicas need Horovod process sets: set {DYNAMIC_PROCESS_SETS}=1 before hvd.init()")
        return hvd.add_process_set(ranks)

    groups = [process_set(layout.group_ranks(group)) for group in range(layout.groups)]
    peers = [process_set(layout.peer_ranks(position)) for position in range(layout.group_size)]
    return ProcessSets(groups[layout.group], peers[layout.position])


def gather_lane_outputs(local: tf.Tensor, process_set: hvd.ProcessSet | None, start: int, order: Sequence[int]
                        ) -> tf.Tensor:
    """This rank's lane outputs ``[L_rank, B, K]`` -> every lane's ``[B, K, L]`` in lane order.

    One allgather over ``process_set`` (rank-major rows, ``order[l]`` = row of lane ``l``). Its
    gradient is the upstream gradient's rows ``start : start + L_rank``: the loss is replicated, so
    every rank already holds the whole upstream gradient (Horovod's own allgather gradient would
    average it over the ranks first, under a name derived from graph op names that differ between
    ranks holding different lanes).
    """

    @tf.custom_gradient
    def allgather(rows):
        if process_set is None:
            gathered = tf.identity(rows)
        else:
            gathered = hvd.allgather(rows, name="capsnet.lane_outputs", ignore_name_scope=True,
                                     process_set=process_set)

        def gradient(upstream):
            return tf.convert_to_tensor(upstream)[start:start + tf.shape(rows)[0]]  # dense: tf.gather's are slices

        return gathered, gradient

    return tf.transpose(tf.gather(allgather(local), list(order)), (1, 2, 0))


class LaneShard(MultiLaneCapsNet):
    """This rank's part of an MLCN spread over a replica's ranks (see the module docstring).

    ``lane_slots[l]``: the slot (position in the replica and device) of lane ``l``; this rank, at
    ``position``, builds and holds only the lanes whose slot has ``rank == position``, each under
    ``tf.device`` of its slot; ``main_device`` holds the replicated part. Not saved as such:
    :func:`gather_full_model` makes the ordinary MLCN.
    """

    def __init__(self, input_shape: Sequence[int], n_class: int, lanes: Sequence, routings: int,
                 lane_dropout: float, *, lane_slots: Sequence[Slot], position: int, sets: ProcessSets,
                 main_device: str | None = None, **kwargs):
        self.lane_slots = list(lane_slots)
        self.position, self.sets = position, sets
        self.local_lanes = [lane for lane, slot in enumerate(self.lane_slots) if slot.rank == position]
        if not self.local_lanes:
            raise ValueError(f"rank {position} of the replica has no lane")
        gathered = sorted(range(len(self.lane_slots)), key=lambda lane: (self.lane_slots[lane].rank, lane))
        self.gather_order = [gathered.index(lane) for lane in range(len(gathered))]
        self.gather_start = gathered.index(self.local_lanes[0])
        super().__init__(input_shape, n_class, lanes, routings, None, lane_dropout, main_device=main_device, **kwargs)
        self.lane_paths = {variable.path for lane in self.local_lanes
                           for variable in self.lane_blocks[lane].trainable_variables}
        local_counts = {lane: self.lane_blocks[lane].count_params() for lane in self.local_lanes}
        every = ([local_counts] if sets.group is None else
                 hvd.allgather_object(local_counts, name="capsnet.lane_parameters", process_set=sets.group))
        self.other_lane_parameters = sum(count for counts in every for lane, count in counts.items()
                                         if lane not in local_counts)

    def parameter_count(self) -> int:
        """The whole MLCN's: this rank's weights and the other ranks' lanes."""
        return self.count_params() + self.other_lane_parameters

    def lane_device(self, index: int) -> str | None:
        return self.lane_slots[index].device

    def lane_outputs(self, images) -> tf.Tensor:
        local = []
        for lane in self.local_lanes:
            with device_scope(self.lane_device(lane)):
                local.append(self.lane_blocks[lane](images))
        with device_scope(self.main_device):
            return gather_lane_outputs(tf.stack(local, axis=0), self.sets.group, self.gather_start, self.gather_order)

    def gradients(self, tape: tf.GradientTape, loss: tf.Tensor, variables: list) -> list:
        """Local gradients; replicated weights' averaged over all ranks, lanes' over their peers."""
        grads = list(super().gradients(tape, loss, variables))
        # Exchange only once this rank's whole backward pass is done: otherwise a rank may wait in
        # the allreduce for a peer that runs its lanes' backward first, then run its own while the
        # peer waits, and the ranks' backward passes no longer overlap.
        with tf.control_dependencies([grad for grad in grads if grad is not None]):
            grads = [None if grad is None else tf.identity(grad) for grad in grads]
        for name, process_set, select in (
                ("capsnet.replicated_gradients", hvd.global_process_set if hvd.size() > 1 else None,
                 lambda variable: variable.path not in self.lane_paths),
                ("capsnet.lane_gradients", self.sets.peers, lambda variable: variable.path in self.lane_paths)):
            chosen = [i for i, variable in enumerate(variables) if select(variable) and grads[i] is not None]
            if process_set is None or not chosen:
                continue
            averaged = hvd.grouped_allreduce([tf.convert_to_tensor(grads[i]) for i in chosen], op=hvd.Average,
                                             name=name, ignore_name_scope=True, process_set=process_set)
            for i, grad in zip(chosen, averaged):
                grads[i] = grad
        return grads

    def replicated_variables(self) -> list:
        """The variables every rank holds (decoder, metrics' and dropout's state)."""
        return [v for v in self.variables if v.path not in self.lane_paths]

    def get_config(self) -> dict:
        raise NotImplementedError("a LaneShard is not saved: save gather_full_model(shard, layout)")


class BroadcastReplicated(keras.callbacks.Callback):
    """At the start of ``fit``: every rank takes rank 0's replicated weights (floating-point
    variables outside the lanes), so that the replicas of the decoder start identical even where
    random ops differ between devices. Lane weights come from the seed (see the module docstring)."""

    def on_train_begin(self, logs: dict | None = None) -> None:
        for index, variable in enumerate(self.model.replicated_variables()):
            if tf.as_dtype(variable.dtype).is_floating:
                variable.assign(hvd.broadcast(variable.value, root_rank=0, name=f"capsnet.replicated.{index}"))


def lane_of_key(key: str) -> int | None:
    """The lane that a :mod:`capsnet.state` key belongs to (``lane3/conv1/kernel``,
    ``lane3_conv1_kernel_momentum`` -> 3), ``None`` for the replicated part."""
    head = key.split("/")[0].split("_")[0]
    return int(head[4:]) if head.startswith("lane") and head[4:].isdigit() else None


def gather_full_model(shard: LaneShard, layout: RankGroups) -> MultiLaneCapsNet | None:
    """Collective: rank 0 gets the ordinary MLCN (no placement, same config) with the whole
    training state: every lane's weights and Adam moments from replica 0's ranks, the replicated
    part (decoder, step count, random-seed state) from rank 0; the other ranks get ``None``."""
    mine = set(shard.local_lanes)
    state = training_state(shard, keep=lambda key: lane_of_key(key) in mine or (
        layout.rank == 0 and lane_of_key(key) is None)) if layout.group == 0 else {}
    every = hvd.allgather_object(state, name="capsnet.training_state")
    if layout.rank != 0:
        return None
    full = MultiLaneCapsNet(shard.image_shape, shard.n_class, shard.lanes, shard.routings, None,
                            shard.lane_dropout, decoder_units=shard.decoder_units,
                            reconstruction_weight=shard.reconstruction_weight)
    full.compile(optimizer=type(shard.optimizer).from_config(shard.optimizer.get_config()))
    restore_training_state(full, {key: value for part in every for key, value in part.items()})
    return full


def local_devices(config: TrainConfig) -> list[str]:
    """The devices this rank offers its lanes: ``--devices``, else its GPU (``init_workers``
    leaves one visible) or its CPU."""
    if config.devices is not None:
        return parse_devices(config.devices)
    return ["/device:GPU:0" if tf.config.list_physical_devices("GPU") else "/device:CPU:0"]


def gather_slots(layout: RankGroups, devices: list[str], probe: bool) -> tuple[list[Slot], list[float] | None]:
    """Collective: the slots of replica 0 (every position's devices, with its host) and, if
    ``probe``, their speed factors: each rank times :func:`~capsnet.placement.probe_device_seconds`
    on its own devices, and a slot's time is the slowest over the replicas (a synchronous step
    waits for it)."""
    seconds = list(probe_device_seconds(devices).values()) if probe else []
    table = hvd.allgather_object({"host": socket.gethostname(), "devices": devices, "seconds": seconds},
                                 name="capsnet.slots")
    slots, slot_seconds = [], []
    for position in range(layout.group_size):
        entry = table[position]
        for index, device in enumerate(entry["devices"]):
            slots.append(Slot(position, entry["host"], device))
            if probe:
                slot_seconds.append(max(table[rank]["seconds"][index] for rank in layout.peer_ranks(position)))
    return slots, speeds_from_seconds(slot_seconds) if probe else None


def build_shard(config: TrainConfig, setup: Setup, layout: RankGroups, sets: ProcessSets) -> Setup:
    """Collective: place ``setup.lanes`` over the replica's slots (costs and speeds as
    ``capsnet train``; every rank computes the same placement, checked), build this rank's
    :class:`LaneShard` with the seed's initial weights, compiled without XLA (Horovod's ops are
    not XLA ops); returns ``setup`` with the shard and the placement's table and record."""
    data, lanes = setup.data, setup.lanes
    devices = local_devices(config)
    main_device = setup.main_device or devices[0]
    slots, speeds = gather_slots(layout, devices, probe=config.speeds == "auto")
    if config.speeds != "auto":
        speeds = list(speed_map(config.speeds, [str(slot) for slot in slots]).values())
    costs = lane_costs(config.cost, lanes, input_shape=data.image_shape, n_class=data.num_classes,
                       device=main_device, batch_size=config.batch_size)
    costs = hvd.broadcast_object(costs, root_rank=0, name="capsnet.lane_costs")  # measured ones differ
    assignment = place_on_slots(lanes, slots, config.placement, speeds, costs, config.seed)
    check_same_config({"slots": [str(slot) for slot in slots], "placement": assignment}, what="lane placement")
    keras.utils.set_random_seed(config.seed)
    shard = LaneShard(data.image_shape, data.num_classes, lanes, config.routings, config.lane_dropout,
                      lane_slots=[slots[index] for index in assignment], position=layout.position, sets=sets,
                      main_device=main_device)
    shard.compile(optimizer=keras.optimizers.Adam(config.lr), jit_compile=False)
    if config.resume:  # every rank reads --out's model.keras: its own lanes' and the replicated state
        restore_training_state(shard, saved_state(config.out))
    table = format_slot_table(lanes, slots, assignment, speeds, costs)
    if layout.groups > 1:
        table += (f"\n{layout.groups} replicas of {layout.group_size} ranks (data parallel between them): "
                  f"rank r of replica g is global rank g·{layout.group_size} + r")
    return dataclasses.replace(
        setup, model=shard, devices=devices, main_device=main_device, placement=None,
        speeds={str(slot): speed for slot, speed in zip(slots, speeds)} if speeds else None, costs=costs,
        placement_table=table, placement_record=slot_placement_record(lanes, slots, assignment))
