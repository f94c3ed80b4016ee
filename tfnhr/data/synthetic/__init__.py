"""Embedded data made on the machine, no download: handwriting rendered with the bundled fonts
(:mod:`~tfnhr.data.synthetic.handwriting`, fonts in ``fonts/``, texts in ``text/``), such sets
written in the IAM layout (:mod:`~tfnhr.data.synthetic.iam_writer`), synthetic pages with layout
files (:mod:`~tfnhr.data.synthetic.pages`) and toy digit strings
(:mod:`~tfnhr.data.synthetic.digit_strings`).

May import: tfnhr.config, tfnhr.runtime, tfnhr.data.formats."""
