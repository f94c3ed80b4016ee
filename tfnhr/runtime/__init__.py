"""The process a command runs in, free of TensorFlow: what it prints besides its output
(:mod:`~tfnhr.runtime.console`), progress lines (:mod:`~tfnhr.runtime.progress`), work spread over
processes (:mod:`~tfnhr.runtime.parallel`), the installed stack and cores
(:mod:`~tfnhr.runtime.stack`) and what Horovod was built with (:mod:`~tfnhr.runtime.horovod_build`).

May import: tfnhr.config."""
