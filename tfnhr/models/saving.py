"""Loading saved recognizers and carrying weights from one model kind to the other.

Both model classes (:class:`~tfnhr.models.recognizer.Recognizer` and
:class:`~tfnhr.models.config_network.ConfigNetwork`) are imported here, so loading a ``.keras``
file finds whichever class it names.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import keras

from tfnhr.models.config_network import ConfigNetwork
from tfnhr.models.ctc_model import CtcModel
from tfnhr.models.recognizer import Recognizer


def load_recognizer(path: str | Path) -> CtcModel:
    """A recognizer saved with ``model.save(path)`` (``.keras``): a :class:`Recognizer` or a
    :class:`ConfigNetwork`. Use this rather than ``keras.models.load_model`` in a fresh process:
    importing this module registers the classes the file names.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for a folder (naming the
    ``best.keras`` in it), a file that is not a Keras archive or cannot be loaded, or one that
    holds no recognizer."""
    path = Path(path)
    if path.is_dir():
        inside = path / "best.keras"
        hint = f"did you mean {inside}?" if inside.is_file() else "pass a .keras file, e.g. a training run's best.keras"
        raise ValueError(f"{path} is a folder, not a model file: {hint}")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such model file")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not a Keras model file (a .keras file is a zip archive; this one is not)")
    try:
        model = keras.models.load_model(path)
    except Exception as error:  # noqa: BLE001  (Keras raises many kinds for a damaged archive)
        reason = " ".join(str(error).split())[:300]
        raise ValueError(f"{path} could not be loaded as a Keras model: {type(error).__name__}: {reason}") from None
    if not isinstance(model, CtcModel):
        raise ValueError(f"{path} holds a {type(model).__name__}, not a tfnhr recognizer")
    return model


def copy_recognizer_weights(recognizer: Recognizer, network: ConfigNetwork) -> None:
    """Put a hand-built :class:`Recognizer`'s weights into ``network``, a config network with its
    layer names (e.g. from the shipped ``small``/``large`` files): each layer's into the layer of
    that name, the per-pixel ``scores`` into the ``ctc`` output's projection. A trained preset
    model then carries on as a config network (to extend it, say).
    ``ValueError`` if a layer is missing or its weights do not fit."""
    for layer in recognizer.layers:
        if not layer.weights:
            continue
        try:
            target = network.get_layer(network.plan.output).dense if layer.name == "scores" else network.get_layer(layer.name)
            target.set_weights(layer.get_weights())
        except (AttributeError, ValueError) as error:
            raise ValueError(f"the recognizer's layer {layer.name!r} has no counterpart in the network: {error}") from None
