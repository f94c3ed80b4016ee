"""Config files (JSON or YAML): a ``network`` plus the training parameters, in one file (Doetsch et al. 2017, §3.1).

Layout::

    {
      "network": {"mdlstm1": {"class": "mdlstm2d", "n_out": 2}, ...,
                  "output": {"class": "ctc", "from": ["mdlstm3"], "directions": 4}},
      "learning_rate": 0.005, "optimizer": "adam", "gradient_clip": 10.0,
      "batch_pixels": null, "schedule": "halve_on_either", "epochs": 80, "height": null, "seed": 0,
      "augment": "default", "validate_every": null, "halve_start": 0.5, "halve_patience": 2,
      "halve_margin": 1.0, "anneal": 0.5, "sort_window": 1, "ema": 0.99, "confidence_penalty": 0.1,
      "normalize_spacing": false
    }

Only ``network`` is required. :data:`TRAINING_KEYS` lists the training parameters, with what each
may hold (each is the ``config`` key of a :class:`~tfnhr.config.train_options.TrainOptions`
field); any other key is an error (a typo must not be ignored). ``optimizer`` is a name
(``adam``, ``sgd``, ``rmsprop``, ``nadam``, ``adagrad``, ``adadelta``) or a mapping with
``class`` and that Keras optimizer's arguments (e.g. ``{"class": "sgd", "momentum": 0.9,
"nesterov": true}``). ``schedule`` is ``halve_on_either|both|cer|wer`` (Wenniger et al. 2019's learning rate
halving on the validation CER/WER) or ``constant``; ``halve_start`` and ``halve_patience`` say when
halving may begin and how many worse validations in a row it waits for, ``halve_margin`` by how
many standard errors of the best rate a validation must exceed it to count as worse
(:class:`~tfnhr.training.callbacks.LearningRateHalving`). ``augment`` is a training-time
augmentation level (:mod:`tfnhr.data.augment`); ``validate_every`` validates every N updates
instead of every epoch; ``anneal`` lowers the learning rate over the end of a time limit;
``sort_window`` batches lines of similar widths (windows of that many batches; 1: random batches);
``ema`` validates and keeps a moving average of the weights with that momentum (null: the last
update's weights); ``confidence_penalty`` subtracts that weight times the output columns'
entropy from the CTC loss; ``normalize_spacing`` scales every line's width to the training lines' median
stroke spacing (:mod:`tfnhr.data.spacing`).

The shipped files (:func:`shipped_configs`: ``small``, ``large`` = the two recognizer sizes of
Wenniger et al. 2019, ``blstm`` = RETURNN's Fig. 1 bidirectional LSTM over the collapsed image) can be named
without a path: ``tfnhr train --config small``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tfnhr.config.choices import SHIPPED_CONFIGS, shipped_configs
from tfnhr.config.options import config_checks
from tfnhr.config.train_options import TrainOptions
from tfnhr.network.errors import NetworkConfigError
from tfnhr.network.plan import plan_network

TRAINING_KEYS: dict[str, tuple[Callable[[Any], bool], str]] = config_checks(TrainOptions)
"""Training parameters a config file may set: key -> (check, what it must be), as the
:class:`~tfnhr.config.train_options.TrainOptions` fields they set declare them."""


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """A loaded config file: its ``network`` mapping, the ``training`` parameters it sets (a
    subset of :data:`TRAINING_KEYS`) and its ``source`` path."""

    network: dict
    training: dict
    source: Path


def resolve_config_path(name_or_path: str | Path) -> Path:
    """A shipped config's name (``"small"``) or a path -> the file's path."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    if path.suffix == "" and (SHIPPED_CONFIGS / f"{path}.json").is_file():
        return SHIPPED_CONFIGS / f"{path}.json"
    raise FileNotFoundError(f"{name_or_path}: no such config file (shipped configs: {', '.join(shipped_configs())})")


def load_config(name_or_path: str | Path) -> NetworkConfig:
    """Read and check a config file (``.json``, or ``.yaml``/``.yml``); see the module docstring.

    Raises ``FileNotFoundError`` and :class:`~tfnhr.network.plan.NetworkConfigError` (a
    ``ValueError``) naming the file, and the line for syntax errors."""
    path = resolve_config_path(name_or_path)
    content = _parse(path)
    if not isinstance(content, dict) or "network" not in content:
        raise NetworkConfigError(f"{path}: expected a mapping with a 'network' entry")
    training = {key: value for key, value in content.items() if key != "network"}
    for key, value in training.items():
        if key not in TRAINING_KEYS:
            raise NetworkConfigError(f"{path}: unknown setting {key!r} (known: network, {', '.join(TRAINING_KEYS)})")
        check, expect = TRAINING_KEYS[key]
        if not check(value):
            raise NetworkConfigError(f"{path}: {key!r} must be {expect}, got {value!r}")
    try:
        plan_network(content["network"])
    except NetworkConfigError as error:
        raise NetworkConfigError(f"{path}: {error}") from None
    return NetworkConfig(content["network"], training, path)


def _parse(path: Path):
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise NetworkConfigError(f"{path}:{where} not valid YAML: {getattr(error, 'problem', error)}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise NetworkConfigError(f"{path}: line {error.lineno}, column {error.colno}: not valid JSON: {error.msg}") from None
