"""Networks described in config files (Doetsch et al. 2017, §3.1): :func:`load_config` reads a
JSON/YAML file, :func:`plan_network` checks and orders its ``network``; the Keras model built
from it is :class:`tfnhr.models.ConfigNetwork`.

May import: tfnhr.charset, tfnhr.config, tfnhr.layers.
"""

from tfnhr.network.config_file import NetworkConfig, load_config
from tfnhr.network.errors import NetworkConfigError
from tfnhr.network.plan import plan_network

__all__ = ["NetworkConfig", "load_config", "NetworkConfigError", "plan_network"]
