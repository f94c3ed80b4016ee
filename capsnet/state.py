"""A model's training state by name: its variables and its optimizer's, keyed independently of
the model's own name, so that state moves between models that hold the same layers — a saved
MLCN and a fresh one (``capsnet train --resume``), or the whole MLCN and the share of it that one
Horovod rank holds (``horovod_jobs.model_parallel``).

Keys: a model variable's path without the model's name (``lane3/conv1/kernel``); an optimizer
variable's name without the model's name (``lane3_conv1_kernel_momentum``: Keras names an
optimizer slot after its variable's path) or as it is (``iteration``, ``learning_rate``).
"""

from __future__ import annotations

import keras
import numpy as np


def _model_keys(model: keras.Model) -> dict[str, keras.Variable]:
    """``{key: variable}`` of the model's variables. Random-seed states (dropout's) have paths
    numbered by a process-wide counter; they are keyed by their order in the model instead."""
    prefix, keyed, seeds = f"{model.name}/", {}, 0
    for variable in model.variables:
        if variable.path.endswith("seed_generator_state") and not variable.path.startswith(prefix):
            key, seeds = f"seed_generator_state#{seeds}", seeds + 1
        else:
            key = variable.path[len(prefix):] if variable.path.startswith(prefix) else variable.path
        keyed[key] = variable
    return keyed


def _optimizer_key(model: keras.Model, name: str) -> str:
    prefix = f"{model.name.replace('/', '_')}_"
    return name[len(prefix):] if name.startswith(prefix) else name


def _keyed_variables(model: keras.Model) -> dict[str, keras.Variable]:
    """:func:`_model_keys` and, if the model's optimizer is built, its variables by key."""
    keyed = _model_keys(model)
    optimizer = getattr(model, "optimizer", None)  # None or absent: not compiled
    if optimizer is not None and optimizer.built:
        keyed.update({_optimizer_key(model, v.name): v for v in optimizer.variables})
    return keyed


def training_state(model: keras.Model, keep=lambda key: True) -> dict[str, np.ndarray]:
    """``{key: value}`` of the model's variables and its optimizer's (if built) whose key ``keep``
    accepts."""
    return {key: v.numpy() for key, v in _keyed_variables(model).items() if keep(key)}


def restore_training_state(model: keras.Model, state: dict[str, np.ndarray]) -> None:
    """Assign ``state`` (from :func:`training_state`) to the model's variables and its optimizer's
    (built here if needed). Every trainable variable of ``model`` must be in ``state``
    (``ValueError`` names those that are not, or shapes that differ); optimizer variables and
    random-seed states that ``state`` lacks keep their values."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not optimizer.built:
        optimizer.build(model.trainable_variables)
    targets = _keyed_variables(model)
    trainable = {id(v) for v in model.trainable_variables}
    required = {key for key, v in targets.items() if id(v) in trainable}
    missing = sorted(key for key in required if key not in state)
    if missing:
        raise ValueError(f"the saved state lacks {len(missing)} weights of this model "
                         f"(e.g. {', '.join(missing[:3])}): it is another architecture")
    for key, variable in targets.items():
        if key not in state:
            continue
        if tuple(np.shape(state[key])) != tuple(variable.shape):
            raise ValueError(f"saved {key} has shape {np.shape(state[key])}, this model's {tuple(variable.shape)}")
        variable.assign(state[key])
