"""Networks described in config files (RETURNN-style, seed §3.1): :func:`load_config` reads a
JSON/YAML file, :func:`plan_network` checks and orders its ``network``, :class:`ConfigNetwork`
is the Keras model built from it."""

from tfnhr.network.config_file import NetworkConfig, load_config, make_optimizer, shipped_configs
from tfnhr.network.model import ConfigNetwork, build_config_network
from tfnhr.network.plan import NetworkConfigError, plan_network

__all__ = ["ConfigNetwork", "NetworkConfig", "NetworkConfigError", "build_config_network", "load_config",
           "make_optimizer", "plan_network", "shipped_configs"]
