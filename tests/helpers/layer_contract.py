"""``check_layer``: the contract every Keras layer of the project keeps, in the spirit of Keras'
own ``run_layer_test``:

1. it runs on the given inputs (ragged ``[B, (H), (W), C]`` batches, or dense tensors);
2. its config round-trips (``get_config`` -> ``from_config`` -> the same config), also through
   Keras' registry (``serialize_keras_object``), and the rebuilt layer with the same weights
   computes the same outputs;
3. saved in a ``.keras`` file (inside a one-layer model) and loaded in its place, it computes
   the same outputs;
4. where it applies, the ragged and the dense forms of a batch of equal-size examples give the
   same outputs;
5. under the ``mixed_float16`` policy (float16 compute, float32 variables) it runs and stays
   close to its float32 outputs with the same weights.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf


@keras.saving.register_keras_serializable(package="tests")
class OneLayerModel(keras.Model):
    """A model holding one layer, so that a layer alone can be saved to and loaded from ``.keras``."""

    def __init__(self, layer: keras.layers.Layer | dict, **kwargs) -> None:
        super().__init__(**kwargs)
        self.inner = layer if isinstance(layer, keras.layers.Layer) else keras.saving.deserialize_keras_object(layer)

    def build(self, input_shape) -> None:
        if not self.inner.built:
            self.inner.build(input_shape)
        self.built = True

    def call(self, inputs, training: bool = False):
        return self.inner(inputs, training=training)

    def get_config(self) -> dict:
        return {**super().get_config(), "layer": keras.saving.serialize_keras_object(self.inner)}


def as_arrays(outputs) -> list[np.ndarray]:
    """A layer's output(s) as flat NumPy arrays (ragged values, dense tensors, tuples of them)."""
    if isinstance(outputs, (list, tuple)):
        return [array for output in outputs for array in as_arrays(output)]
    if isinstance(outputs, tf.RaggedTensor):
        return [outputs.flat_values.numpy(), *(lengths.numpy() for lengths in outputs.nested_row_lengths())]
    return [np.asarray(keras.ops.convert_to_numpy(outputs))]


def assert_same_outputs(expected, actual, atol: float, what: str) -> None:
    """Equal structure and values within ``atol`` (absolute) and ``atol`` relative."""
    expected, actual = as_arrays(expected), as_arrays(actual)
    assert len(expected) == len(actual), what
    for want, got in zip(expected, actual):
        assert want.shape == got.shape, f"{what}: shape {got.shape} != {want.shape}"
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=atol, rtol=atol, err_msg=what)


def check_layer(cls: type[keras.layers.Layer], kwargs: Mapping, inputs, tmp_path: Path, *,
                dense_inputs=None, to_dense: Callable | None = None, mixed_precision: bool = True,
                atol: float = 1e-5, mixed_atol: float = 2e-2) -> keras.layers.Layer:
    """Apply the contract in the module docstring to ``cls(**kwargs)`` on ``inputs``; returns the
    built layer.

    ``dense_inputs``: the same examples as a dense tensor (all of one size), whose outputs, turned
    ragged-comparable by ``to_dense`` (applied to the ragged outputs; default
    ``RaggedTensor.to_tensor``), must equal the ragged ones. ``mixed_precision=False`` skips
    step 5 (for layers that run in float32 by design; say why where it is used).
    """
    layer = cls(**kwargs)
    outputs = layer(inputs, training=False)

    config = layer.get_config()
    clone = cls.from_config(config)
    assert clone.get_config() == config, "from_config(get_config()) changed the config"
    registered = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(registered) is cls and registered.get_config() == config, "not found by Keras' registry"
    clone(inputs, training=False)
    clone.set_weights(layer.get_weights())
    assert_same_outputs(outputs, clone(inputs, training=False), atol, "config round trip")

    path = tmp_path / f"{cls.__name__}.keras"
    holder = OneLayerModel(layer)
    holder(inputs)
    holder.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded.inner) is cls and loaded.inner.get_config() == config
    assert_same_outputs(outputs, loaded(inputs, training=False), atol, ".keras round trip")

    if dense_inputs is not None:
        dense = layer(dense_inputs, training=False)
        convert = to_dense or (lambda ragged: ragged.to_tensor())
        assert_same_outputs(dense, convert(outputs), atol, "ragged vs dense")

    if mixed_precision:
        mixed = cls(**{**kwargs, "dtype": "mixed_float16"})
        mixed(inputs, training=False)
        mixed.set_weights(layer.get_weights())
        assert all(weight.dtype == "float32" for weight in mixed.weights), "mixed precision keeps float32 variables"
        assert_same_outputs(outputs, mixed(inputs, training=False), mixed_atol, "mixed_float16 vs float32")
    return layer
