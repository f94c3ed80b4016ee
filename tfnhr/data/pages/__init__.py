"""Pages with PAGE-XML or ALTO layout files: reading the layouts
(:mod:`~tfnhr.data.pages.layout`), cutting line images along their polygons
(:mod:`~tfnhr.data.pages.line_cutting`), page folders as training data
(:mod:`~tfnhr.data.pages.reading`) and writing recognized text back
(:mod:`~tfnhr.data.pages.writing`).

May import: tfnhr.config, tfnhr.runtime, tfnhr.data, tfnhr.data.formats."""
