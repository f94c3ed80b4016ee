"""Sub-commands of the ``tfnhr`` console script, one module each (see :mod:`tfnhr.cli`)."""
