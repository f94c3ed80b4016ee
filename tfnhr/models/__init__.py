"""The recognizers: :class:`CtcModel` (what every recognizer shares: CTC loss, ``fit`` steps,
layer outputs, saved charset and input height), the hand-built :class:`Recognizer` (Wenniger
et al. 2019, §II) and :class:`ConfigNetwork` (layers from a config file, Doetsch et al. 2017,
§3.1), and loading them (:func:`load_recognizer`).

May import: tfnhr.charset, tfnhr.config, tfnhr.layers, tfnhr.network.
"""

from tfnhr.models.config_network import ConfigNetwork, build_config_network, concatenate_channels
from tfnhr.models.ctc_model import CtcModel
from tfnhr.models.recognizer import PRESETS, Recognizer, build_recognizer
from tfnhr.models.saving import copy_recognizer_weights, load_recognizer

__all__ = ["CtcModel", "Recognizer", "build_recognizer", "PRESETS", "ConfigNetwork", "build_config_network",
           "concatenate_channels", "load_recognizer", "copy_recognizer_weights"]
