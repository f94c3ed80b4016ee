"""The layer classes a config file's ``network`` may use, their parameters and what they make.

Each entry of :data:`LAYER_CLASSES` says which parameters a layer of that class takes (type,
default, allowed values), what kind of input it reads and gives (``"image"``: ragged
``[B, (H), (W), C]``; ``"sequence"``: ragged ``[B, (T), C]`` along the image width), how much it
shrinks the height and width, and which Keras layer it builds.

======== ============================================= ================= ======================
class    parameters (default)                          input -> output   Keras layer
======== ============================================= ================= ======================
mdlstm2d n_out, directions (4), cell (leaky_lp),       image -> image    :class:`MDLSTM2D`
         packing (examples), dropout (0)                                 (n_out per direction)
block_conv n_out, block ([2, 4]), activation (tanh)    image -> image    :class:`BlockConv2D`
conv     n_out, kernel ([3, 3]), activation (tanh)     image -> image    :class:`SameConv2D`
rec      n_out, direction (1)                          image -> image,   :class:`SequenceLSTM`
                                                       sequence -> seq.  (along the width)
dropout  rate                                          any -> same       :class:`RaggedDropout`
linear   n_out, directions (1), activation (none)      any -> same       :class:`DirectionSharedDense`
collapse (none)                                        image -> sequence :class:`SumOverHeight`
ctc      directions (1), project (true)                image or          :class:`CtcScores`
                                                       sequence -> seq.  (output and CTC loss)
======== ============================================= ================= ======================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import keras

from tfnhr.charset import Charset
from tfnhr.layers import (BlockConv2D, DirectionSharedDense, MDLSTM2D, RaggedDropout, SameConv2D, SequenceLSTM,
                          SumOverHeight)
from tfnhr.config.choices import CELLS, PACKING_MODES
from tfnhr.layers.ctc_scores import CtcScores

IMAGE, SEQUENCE = "image", "sequence"
REQUIRED = object()
"""The default of a parameter that must be given."""


@dataclasses.dataclass(frozen=True)
class Param:
    """One parameter: ``check(value)`` is true for allowed values, described by ``expect``."""

    check: Callable[[Any], bool]
    expect: str
    default: Any = REQUIRED


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _size_pair(value) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == 2 and all(_positive_int(v) for v in value)


def _activation(value) -> bool:
    if value is None:
        return True
    try:
        return isinstance(value, str) and keras.activations.get(value) is not None
    except ValueError:
        return False


def _rate(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1


def _one_of(*allowed) -> Param:
    return Param(lambda value: any(value == a and type(value) is type(a) for a in allowed),
                 "one of " + ", ".join(repr(a) for a in allowed))


N_OUT = Param(_positive_int, "a positive integer")
ACTIVATION = "an activation name such as 'tanh', 'relu' or 'sigmoid' (or null)"


@dataclasses.dataclass(frozen=True)
class LayerClass:
    """A layer class of the config language.

    ``takes``: the input kinds it reads; ``gives(kind)``: its output kind for input ``kind``;
    ``shrinks(params)``: (height, width) input pixels per output pixel; ``make(name, params,
    charset)``: its Keras layer; ``loss``: whether it is the network's output and loss."""

    takes: tuple[str, ...]
    params: dict[str, Param]
    make: Callable[[str, dict, Charset], keras.layers.Layer]
    gives: Callable[[str], str] = lambda kind: kind
    shrinks: Callable[[dict], tuple[int, int]] = lambda params: (1, 1)
    loss: bool = False


LAYER_CLASSES: dict[str, LayerClass] = {
    "mdlstm2d": LayerClass(
        (IMAGE,),
        {"n_out": N_OUT, "directions": dataclasses.replace(_one_of(1, 2, 4), default=4),
         "cell": dataclasses.replace(_one_of(*CELLS), default="leaky_lp"),
         "packing": dataclasses.replace(_one_of(*PACKING_MODES), default="examples"),
         "dropout": Param(_rate, "a number in [0, 1)", 0.0)},
        lambda name, p, _: MDLSTM2D(p["n_out"], cell=p["cell"], directions=p["directions"],
                                    packing=p["packing"], dropout=float(p["dropout"]), name=name)),
    "block_conv": LayerClass(
        (IMAGE,),
        {"n_out": N_OUT, "block": Param(_size_pair, "[height, width] of positive integers", [2, 4]),
         "activation": Param(_activation, ACTIVATION, "tanh")},
        lambda name, p, _: BlockConv2D(p["n_out"], block=tuple(p["block"]), activation=p["activation"], name=name),
        shrinks=lambda p: tuple(p["block"])),
    "conv": LayerClass(
        (IMAGE,),
        {"n_out": N_OUT, "kernel": Param(_size_pair, "[height, width] of positive integers", [3, 3]),
         "activation": Param(_activation, ACTIVATION, "tanh")},
        lambda name, p, _: SameConv2D(p["n_out"], kernel=p["kernel"], activation=p["activation"], name=name)),
    "rec": LayerClass(
        (IMAGE, SEQUENCE),
        {"n_out": N_OUT, "direction": dataclasses.replace(_one_of(1, -1), default=1)},
        lambda name, p, _: SequenceLSTM(p["n_out"], direction=p["direction"], name=name)),
    "dropout": LayerClass(
        (IMAGE, SEQUENCE),
        {"rate": Param(_rate, "a number in [0, 1)")},
        lambda name, p, _: RaggedDropout(float(p["rate"]), name=name)),
    "linear": LayerClass(
        (IMAGE, SEQUENCE),
        {"n_out": N_OUT, "directions": Param(_positive_int, "a positive integer", 1),
         "activation": Param(_activation, ACTIVATION, None)},
        lambda name, p, _: DirectionSharedDense(p["n_out"], p["directions"], activation=p["activation"], name=name)),
    "collapse": LayerClass(
        (IMAGE,), {}, lambda name, p, _: SumOverHeight(name=name), gives=lambda kind: SEQUENCE),
    "ctc": LayerClass(
        (IMAGE, SEQUENCE),
        {"directions": Param(_positive_int, "a positive integer", 1),
         "project": Param(lambda v: isinstance(v, bool), "true or false", True)},
        lambda name, p, charset: CtcScores(charset.num_classes, p["directions"], p["project"], name=name),
        gives=lambda kind: SEQUENCE, loss=True),
}
"""Layer classes by the name a config file's ``"class"`` gives."""
