"""Sub-commands of the ``capsnet`` command line, one module each (see :mod:`capsnet.cli`)."""
