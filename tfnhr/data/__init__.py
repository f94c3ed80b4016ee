"""Data: text-image records and sets in memory (:mod:`~tfnhr.data.samples`), batches and shards
by pixels (:mod:`~tfnhr.data.batches`), ``tf.data`` batches (:mod:`~tfnhr.data.dataset`),
sources (IAM folders, HDF5 files; :mod:`~tfnhr.data.sources`), the embedded synthetic
handwriting set, toy digit strings and TFDS builders."""
