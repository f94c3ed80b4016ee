"""From a config's ``network`` dict to a checked build order (RETURNN's construction, Doetsch et al. 2017, §3.1).

A network maps layer names to descriptions ``{"class": ..., "from": [...], ...params}``. The
input image is the layer ``"data"``; a layer without ``"from"`` reads ``"data"`` (RETURNN's
default). Several ``from`` layers are concatenated along the channels (they must give the same
kind of output at the same resolution). The network's output is its one ``ctc`` layer; as in
RETURNN, building starts there and follows ``from`` backwards, so only layers that feed the loss
are built (the others are reported in :attr:`NetworkPlan.unused`).

Every problem raises :class:`NetworkConfigError` naming the layer: an unknown class, a ``from``
that names no layer (with the closest names), an empty ``from``, a cycle (shown as a path), a
parameter that is unknown, missing or of the wrong type/value, an input of the wrong kind (e.g. an
MDLSTM after ``collapse``), inputs at different resolutions, no or several ``ctc`` layers.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping

from tfnhr.network.classes import IMAGE, LAYER_CLASSES, REQUIRED
from tfnhr.network.errors import NetworkConfigError

INPUT = "data"
"""The name of the input image in ``from`` lists."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


@dataclasses.dataclass(frozen=True)
class LayerSpec:
    """One layer to build: its ``name``, ``class_name``, ``sources`` (layer names or ``"data"``)
    and its complete ``params`` (defaults filled in)."""

    name: str
    class_name: str
    sources: tuple[str, ...]
    params: dict


@dataclasses.dataclass(frozen=True)
class NetworkPlan:
    """``layers`` in build order (every layer after its sources; the ``ctc`` output last),
    ``output`` the output's name, ``reduction`` (height, width) input pixels per output column
    row/column, ``unused`` the described layers that feed no loss (not built)."""

    layers: tuple[LayerSpec, ...]
    output: str
    reduction: tuple[int, int]
    unused: tuple[str, ...]


def plan_network(network: Mapping) -> NetworkPlan:
    """Check ``network`` and order the layers that feed its ``ctc`` output; see the module docstring."""
    if not isinstance(network, Mapping) or not network:
        raise NetworkConfigError(f"'network' must be a non-empty mapping of layer names to descriptions, "
                                 f"got {network!r}")
    descriptions = {name: _check_description(name, description) for name, description in network.items()}
    losses = [name for name, d in descriptions.items() if LAYER_CLASSES[d["class"]].loss]
    if len(losses) != 1:
        raise NetworkConfigError("the network needs exactly one 'ctc' layer (its output and loss), got "
                                 + (", ".join(repr(n) for n in losses) if losses else "none"))
    output = losses[0]
    order: list[str] = []
    _visit(output, descriptions, order, path=[])
    specs, kinds, reductions = [], {INPUT: IMAGE}, {INPUT: (1, 1)}
    for name in order:
        spec = _spec(name, descriptions[name])
        kind, reduction = _input_of(spec, kinds, reductions)
        layer_class = LAYER_CLASSES[spec.class_name]
        if kind not in layer_class.takes:
            raise NetworkConfigError(f"layer {name!r}: class {spec.class_name!r} reads {' or '.join(layer_class.takes)} "
                                     f"input, but {_sources_text(spec.sources)} give {kind} output")
        kinds[name] = layer_class.gives(kind)
        height, width = layer_class.shrinks(spec.params)
        reductions[name] = (reduction[0] * height, reduction[1] * width)
        specs.append(spec)
    unused = tuple(name for name in descriptions if name not in set(order))
    return NetworkPlan(tuple(specs), output, reductions[output], unused)


def _check_description(name, description) -> dict:
    if not isinstance(name, str) or not _NAME.match(name):
        raise NetworkConfigError(f"layer name {name!r}: use letters, digits, '_', '.', '-' (not starting "
                                 "with a digit)")
    if name == INPUT:
        raise NetworkConfigError(f"layer name {INPUT!r} is reserved for the input image")
    if not isinstance(description, Mapping):
        raise NetworkConfigError(f"layer {name!r}: the description must be a mapping, got {description!r}")
    if "class" not in description:
        raise NetworkConfigError(f"layer {name!r}: no 'class' (one of {sorted(LAYER_CLASSES)})")
    class_name = description["class"]
    if class_name not in LAYER_CLASSES:
        raise NetworkConfigError(f"layer {name!r}: unknown class {class_name!r}{_did_you_mean(class_name, LAYER_CLASSES)}"
                                 f" (known: {', '.join(sorted(LAYER_CLASSES))})")
    return dict(description)


def _sources(name: str, description: dict) -> tuple[str, ...]:
    sources = description.get("from", [INPUT])
    if isinstance(sources, str):
        sources = [sources]
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise NetworkConfigError(f"layer {name!r}: 'from' must be a layer name or a list of them, got {sources!r}")
    if not sources:
        raise NetworkConfigError(f"layer {name!r}: 'from' is empty (omit it to read {INPUT!r})")
    if len(set(sources)) != len(sources):
        raise NetworkConfigError(f"layer {name!r}: 'from' lists a layer twice: {sources!r}")
    return tuple(sources)


def _visit(name: str, descriptions: dict, order: list[str], path: list[str]) -> None:
    """Depth-first from the output along ``from``: appends ``name`` after its sources."""
    if name in order or name == INPUT:
        return
    if name in path:
        cycle = path[path.index(name):] + [name]
        raise NetworkConfigError(f"layer {name!r}: cycle in 'from': {' -> '.join(reversed(cycle))}")
    for source in _sources(name, descriptions[name]):
        if source != INPUT and source not in descriptions:
            raise NetworkConfigError(f"layer {name!r}: 'from' names unknown layer {source!r}"
                                     f"{_did_you_mean(source, [*descriptions, INPUT])}")
        _visit(source, descriptions, order, path + [name])
    order.append(name)


def _spec(name: str, description: dict) -> LayerSpec:
    class_name = description["class"]
    declared = LAYER_CLASSES[class_name].params
    given = {key: value for key, value in description.items() if key not in ("class", "from")}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise NetworkConfigError(f"layer {name!r}: class {class_name!r} has no parameter {unknown[0]!r}"
                                 f"{_did_you_mean(unknown[0], declared)} (it takes: "
                                 f"{', '.join(declared) or 'none'})")
    params = {}
    for key, param in declared.items():
        if key not in given:
            if param.default is REQUIRED:
                raise NetworkConfigError(f"layer {name!r}: class {class_name!r} needs parameter {key!r} ({param.expect})")
            params[key] = param.default
        elif not param.check(given[key]):
            raise NetworkConfigError(f"layer {name!r}: parameter {key!r} must be {param.expect}, "
                                     f"got {given[key]!r} ({type(given[key]).__name__})")
        else:
            params[key] = given[key]
    return LayerSpec(name, class_name, _sources(name, description), params)


def _input_of(spec: LayerSpec, kinds: dict, reductions: dict) -> tuple[str, tuple[int, int]]:
    """The kind and resolution of a layer's (concatenated) input; sources must agree on both
    (sequences only on their width: their heights were summed away)."""
    found = {(kinds[s], reductions[s] if kinds[s] == IMAGE else reductions[s][1]) for s in spec.sources}
    if len(found) > 1:
        described = ", ".join(f"{s!r}: {kinds[s]} at 1/{reductions[s][0]} x 1/{reductions[s][1]}" for s in spec.sources)
        raise NetworkConfigError(f"layer {spec.name!r}: its 'from' layers cannot be concatenated, they differ in "
                                 f"kind or resolution ({described})")
    return kinds[spec.sources[0]], reductions[spec.sources[0]]


def _sources_text(sources: tuple[str, ...]) -> str:
    return ", ".join(repr(s) for s in sources)


def _did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=2)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
