"""Sub-commands of the ``capsnet`` command line, one module each (see :mod:`capsnet.cli`).

May import: anything of capsnet: command-line modules only wire the library together.
"""
