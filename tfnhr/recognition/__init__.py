"""Reading text lines with a trained recognizer: the transcriber that scales, batches, runs and
decodes (:mod:`~tfnhr.recognition.transcriber`), reading each line in several views
(:mod:`~tfnhr.recognition.views`), where the characters and words are
(:mod:`~tfnhr.recognition.alignment`), pages written back into their layout files
(:mod:`~tfnhr.recognition.pages`) and layer outputs written to HDF5 (:mod:`~tfnhr.recognition.dumps`).

May import: tfnhr.charset, tfnhr.config, tfnhr.runtime, tfnhr.data, tfnhr.data.formats, tfnhr.data.pages,
tfnhr.decoding, tfnhr.models."""
