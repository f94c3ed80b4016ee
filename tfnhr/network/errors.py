"""``NetworkConfigError`` (kept apart from the builders so the CLI can name it without TensorFlow)."""


class NetworkConfigError(ValueError):
    """A network description or config file that cannot be built; the message names the file,
    the layer and the problem."""
