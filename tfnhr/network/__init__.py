"""Networks described in config files (RETURNN-style, seed §3.1): :func:`load_config` reads a
JSON/YAML file, :func:`plan_network` checks and orders its ``network``, :class:`ConfigNetwork`
is the Keras model built from it.

The names are imported on first use, so that reading this package's config helpers (what
``tfnhr --help`` does) does not start TensorFlow.
"""

import importlib

_EXPORTS = {
    "ConfigNetwork": "tfnhr.network.model",
    "build_config_network": "tfnhr.network.model",
    "copy_recognizer_weights": "tfnhr.network.model",
    "NetworkConfig": "tfnhr.network.config_file",
    "load_config": "tfnhr.network.config_file",
    "make_optimizer": "tfnhr.network.config_file",
    "shipped_configs": "tfnhr.network.config_file",
    "NetworkConfigError": "tfnhr.network.errors",
    "plan_network": "tfnhr.network.plan",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
