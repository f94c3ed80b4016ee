"""Settings and what they may be, free of TensorFlow: the names options may take and the defaults
several places share (:mod:`~tfnhr.config.choices`), the allowed ranges of numbers
(:mod:`~tfnhr.config.ranges`).

May import: nothing of the project."""
