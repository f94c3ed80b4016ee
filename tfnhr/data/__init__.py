"""Data: text-image records and sets in memory (:mod:`~tfnhr.data.samples`), reading image files
(:mod:`~tfnhr.data.images`), batches and shards by pixels (:mod:`~tfnhr.data.batches`),
``tf.data`` batches (:mod:`~tfnhr.data.dataset`), training-time augmentation
(:mod:`~tfnhr.data.augment`), stroke-spacing normalization (:mod:`~tfnhr.data.spacing`), where a
``--data`` path's examples come from (:mod:`~tfnhr.data.sources`) and TFDS builders
(:mod:`~tfnhr.data.tfds_builders`). File formats are in :mod:`tfnhr.data.formats`, pages in
:mod:`tfnhr.data.pages`, the embedded synthetic data in :mod:`tfnhr.data.synthetic`; the modules
here may import those sub-packages.

May import: tfnhr.charset, tfnhr.config, tfnhr.runtime.
"""
