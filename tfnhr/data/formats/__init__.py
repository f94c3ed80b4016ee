"""Data sets as files: IAM folders (:mod:`~tfnhr.data.formats.iam`), HDF5 files
(:mod:`~tfnhr.data.formats.hdf5`) and TensorFlow Datasets builders
(:mod:`~tfnhr.data.tfds_builders`).

May import: tfnhr (its version), tfnhr.config, tfnhr.runtime, tfnhr.data, tfnhr.data.synthetic."""
