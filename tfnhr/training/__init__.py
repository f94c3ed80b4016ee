"""Training a recognizer: :class:`TrainOptions` (declared in :mod:`tfnhr.config.train_options`)
resolved from defaults, config files and flags (:mod:`~tfnhr.training.options`), the Keras
callbacks (:mod:`~tfnhr.training.callbacks`) and the loop with its :class:`TrainingHooks`
(:mod:`~tfnhr.training.loop`).

May import: tfnhr.charset, tfnhr.config, tfnhr.runtime, tfnhr.data, tfnhr.network, tfnhr.models, tfnhr.recognition, tfnhr.evaluation.
"""

from tfnhr.config.train_options import TrainOptions
from tfnhr.training.loop import RESUME_FILES, TrainingHooks, load_subset, make_optimizer, train, use_threads
from tfnhr.training.options import options_from_args, resolve_options

__all__ = ["train", "TrainingHooks", "RESUME_FILES", "TrainOptions", "resolve_options", "options_from_args",
           "make_optimizer", "load_subset", "use_threads"]
