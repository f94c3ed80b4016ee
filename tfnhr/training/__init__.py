"""Training a recognizer: :class:`TrainOptions` and :func:`resolve_options`
(:mod:`~tfnhr.training.options`), the Keras callbacks (:mod:`~tfnhr.training.callbacks`) and the
loop with its :class:`TrainingHooks` (:mod:`~tfnhr.training.loop`)."""

from tfnhr.training.loop import RESUME_FILES, TrainingHooks, load_subset, make_optimizer, train, use_threads
from tfnhr.training.options import TrainOptions, resolve_options

__all__ = ["train", "TrainingHooks", "RESUME_FILES", "TrainOptions", "resolve_options", "make_optimizer",
           "load_subset", "use_threads"]
