"""Sub-commands of the ``tfnhr`` console script, one module each (see :mod:`tfnhr.cli`).

May import: anything: command-line modules only wire the library together, and nothing but the
command line imports them.
"""
