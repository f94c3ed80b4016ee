"""``ConfigNetwork``: a recognizer whose layers come from a config file's ``network`` (Doetsch et al. 2017, §3.1).

It is a Keras model over the layer graph that :func:`~tfnhr.network.plan.plan_network` orders:
each layer reads its ``from`` layers' outputs (concatenated along the channels) and the ``ctc``
layer's output is the model's. Being a :class:`~tfnhr.models.ctc_model.CtcModel`, it trains with
``model.fit`` on CTC, saves to ``.keras`` (the network description is its config) and works
with ``tfnhr evaluate``/``recognize``/``serve``/``dump`` like the hand-built
:class:`~tfnhr.models.recognizer.Recognizer`.

It is not a ``keras.Model`` built from ``keras.Input`` (the "functional" API): Keras 3's
symbolic tensors cannot be ragged, and ragged ``[B, (H), (W), C]`` batches are what lets every
layer skip padding (the MDLSTM packs examples instead). The graph is walked in the planned
order inside ``call`` instead, which traces to the same TensorFlow graph.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator, Mapping, Sequence

import keras
import tensorflow as tf

from tfnhr.charset import Charset
from tfnhr.models.ctc_model import CtcModel
from tfnhr.network.classes import LAYER_CLASSES
from tfnhr.network.plan import INPUT, NetworkConfigError, plan_network


@keras.saving.register_keras_serializable(package="tfnhr")
class ConfigNetwork(CtcModel):
    """A CTC recognizer built from ``network`` (a config file's ``network`` mapping).

    Args:
      network: layer names -> ``{"class": ..., "from": [...], ...params}``; see
        :mod:`tfnhr.network.classes` for the classes and :mod:`tfnhr.network.plan` for the rules.
      charset, input_height, stroke_spacing: see :class:`~tfnhr.models.ctc_model.CtcModel`.

    Raises :class:`~tfnhr.network.plan.NetworkConfigError` naming the layer for a description
    that cannot be built. Layers that feed no loss are left out with a warning.
    """

    def __init__(self, network: Mapping, charset: Charset | dict, input_height: int | None = None, **kwargs) -> None:
        super().__init__(charset, input_height, **kwargs)
        self.network = copy.deepcopy(dict(network))
        self.plan = plan_network(self.network)
        if self.plan.unused:
            warnings.warn(f"layers {list(self.plan.unused)} feed no 'ctc' output and are not built", stacklevel=2)
        self.graph_layers = [LAYER_CLASSES[spec.class_name].make(spec.name, spec.params, self.charset)
                             for spec in self.plan.layers]

    @property
    def width_reduction(self) -> int:
        """Input columns per output column (the product of the block widths on the way)."""
        return self.plan.reduction[1]

    @property
    def layer_names(self) -> list[str]:
        return [spec.name for spec in self.plan.layers]

    def forward(self, images, training: bool = False) -> Iterator[tuple[str, tf.RaggedTensor]]:
        """Every planned layer on its sources' outputs, in build order."""
        outputs = {INPUT: images}
        for spec, layer in zip(self.plan.layers, self.graph_layers):
            inputs = concatenate_channels([outputs[source] for source in spec.sources])
            try:
                outputs[spec.name] = layer(inputs, training=training)
            except ValueError as error:
                if layer.built:
                    raise
                raise NetworkConfigError(f"layer {spec.name!r} ({spec.class_name}): {error}") from error
            yield spec.name, outputs[spec.name]

    def get_config(self) -> dict:
        return {**super().get_config(), "network": copy.deepcopy(self.network)}


def concatenate_channels(tensors: Sequence[tf.RaggedTensor | tf.Tensor]) -> tf.RaggedTensor | tf.Tensor:
    """Ragged tensors of one nesting (same examples, heights and widths) joined along the last
    axis; one tensor is returned as it is."""
    if len(tensors) == 1:
        return tensors[0]
    if not all(isinstance(t, tf.RaggedTensor) for t in tensors):
        return tf.concat(tensors, axis=-1)
    first = tensors[0]
    return first.with_flat_values(tf.concat([t.flat_values for t in tensors], axis=-1))


def build_config_network(network: Mapping, charset: Charset, input_height: int | None = None) -> ConfigNetwork:
    """A built :class:`ConfigNetwork` (weights created) for ``charset``."""
    model = ConfigNetwork(network, charset, input_height=input_height)
    model.build()
    return model
