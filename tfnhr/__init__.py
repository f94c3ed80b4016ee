"""tfnhr: fast variable-size MDLSTM handwriting recognition in TensorFlow 2 / Keras 3.

The packages, from the bottom up: :mod:`tfnhr.config` (option names and ranges),
:mod:`tfnhr.runtime` (console, progress, processes, the installed stack), :mod:`tfnhr.data`
(records, batches, ``tf.data``; file formats in :mod:`tfnhr.data.formats`, PAGE-XML/ALTO pages
in :mod:`tfnhr.data.pages`, embedded synthetic data in :mod:`tfnhr.data.synthetic`),
:mod:`tfnhr.lm` and :mod:`tfnhr.decoding` (word LMs, CTC decoders), :mod:`tfnhr.ops`,
:mod:`tfnhr.layers`, :mod:`tfnhr.network` and :mod:`tfnhr.models` (the recognizer),
:mod:`tfnhr.recognition` (reading lines and pages), :mod:`tfnhr.evaluation` (CER/WER, tables,
plots), :mod:`tfnhr.training`, :mod:`tfnhr.serving` (export, HTTP service) and, on top,
:mod:`tfnhr.commands` with :mod:`tfnhr.cli`. Beside them the top level holds only the character
set every part shares (:mod:`tfnhr.charset`). Each package's docstring says what it holds and, in
a ``May import:`` line, which other parts it may import (``tests/project/test_structure.py``
checks it).

May import: nothing of the project (it holds the version only).
"""

__version__ = "0.1.0"
