"""Measuring recognition: CER and WER by edit distance (:mod:`~tfnhr.evaluation.metrics`), tables
of several decoders on one set (:mod:`~tfnhr.evaluation.tables`) and the pictures of a run,
``curves.png`` and ``samples.png`` (:mod:`~tfnhr.evaluation.plots`).

May import: tfnhr.charset, tfnhr.config, tfnhr.data, tfnhr.decoding, tfnhr.models, tfnhr.recognition."""
