"""tfnhr: fast variable-size MDLSTM handwriting recognition in TensorFlow 2 / Keras 3."""

__version__ = "0.1.0"
