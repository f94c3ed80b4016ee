"""What a recognizer training run is told: :class:`TrainOptions`, resolved from defaults < a
config file's training parameters < options given (:func:`resolve_options`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from tfnhr import ranges
from tfnhr.choices import AUGMENT_LEVELS, DEFAULT_MODEL_PRESET, SCHEDULES
from tfnhr.network.config_file import CONFIG_FIELDS, NetworkConfig


MODEL_FIELDS = ("preset", "mdlstm_units", "conv_filters", "block", "dropout", "cell")
"""Fields that describe the hand-built recognizer; a config file describes the network instead."""


@dataclasses.dataclass
class TrainOptions:
    """What to train on and how; every field has the ``tfnhr train`` option of the same name.

    ``height``: scale every image to this many rows (``None``: keep sizes). ``batch_pixels``:
    pixel budget of one batch (after scaling); ``None``: about a dozen training examples of median
    size, at least two of the largest (:func:`~tfnhr.data.batches.auto_batch_pixels`, resolved by
    :func:`~tfnhr.training.train` from the training set). ``time_limit``: minutes after which training
    stops at the end of the running epoch (``None``: no limit). ``max_train``/``max_val``: use
    only the first N samples of each subset. ``network``: a config file's network description
    (:mod:`tfnhr.network`), built instead of the preset recognizer; ``network_source`` names its
    file. ``optimizer``: a name or mapping as in config files
    (:func:`~tfnhr.training.make_optimizer`); ``clipnorm``: global gradient-norm clip (``None``: none). ``halve_on``:
    when the learning rate is halved (:data:`tfnhr.choices.HALVE_ON`); ``halve_start``: halving
    is armed once the validation CER falls below this fraction of the first validation's (``None``:
    from the start); ``halve_patience``: worse validations in a row before it halves, at least
    those of one pass over the data; ``halve_margin``: a validation is worse only when its rate exceeds the
    best's by more than this many binomial standard errors over the validation set's characters
    (words for the WER), so that a small validation set's noise does not halve
    (:class:`~tfnhr.training.callbacks.LearningRateHalving`). ``augment``: training-time
    augmentation level (:data:`tfnhr.choices.AUGMENT_LEVELS`). ``validate_every``: validate (and
    log, checkpoint, maybe halve) every N updates, at most one pass; ``None``: after every pass
    over the data. With it, ``epochs`` still counts passes over the data. ``anneal``: with a
    ``time_limit``, lower the learning rate linearly to 1/20 from this fraction of the limit on
    (:class:`~tfnhr.training.callbacks.TimeBudgetAnnealing`); ``None``: no annealing.
    ``sort_window``: form each training batch from lines of similar widths, sorted within
    windows of this many batches (:func:`~tfnhr.data.batches.similar_width_batches`); ``1``:
    random batches. ``ema``: validate, checkpoint and keep an exponential moving average of the
    weights over the updates with this momentum (:class:`~tfnhr.training.averaging.WeightAveraging`);
    ``None``: the last update's weights. ``confidence_penalty``: subtract this weight times the
    entropy of the output columns' distributions, summed over each line's columns, from its CTC
    loss (:func:`~tfnhr.models.ctc_model.column_entropy`); 0: CTC alone. ``normalize_spacing``: scale every training line's width so
    that its vertical strokes lie the training lines' median distance apart
    (:mod:`tfnhr.data.spacing`); the model keeps that distance as its ``stroke_spacing`` and
    reading applies it (a resumed run keeps its model's). ``threads``: TensorFlow's intra- and inter-op threads for this process, set
    when training starts if TensorFlow has not run an op yet (else its pools stay as they are);
    ``None`` (the default): this process's share of the cores it may use (all of them for one
    process, ``cores // local workers`` for a Horovod worker: :meth:`TrainingHooks.threads
    <tfnhr.training.loop.TrainingHooks.threads>`); ``0``: TensorFlow's default (all cores). A
    process gains from a second thread with the compiled MDLSTM scan, which runs its four
    directions on the intra-op threads (docs/performance.md: 25.4 lines/s on two threads vs 15.6
    on one for the small preset, 2 cores), and loses with the TensorFlow-ops scan (5.1 vs 8.0).
    ``mixed_precision``: build the model under Keras' ``mixed_float16`` (GPU) or ``mixed_bfloat16``
    (CPU) policy (:mod:`tfnhr.training.precision`); a resumed run keeps its model's policy.
    ``resume``: continue the run in ``out``; ``overwrite``: replace it (without either, an
    ``out`` holding a run is refused: :func:`~tfnhr.training.loop.claim_run_folder`). Every
    numeric field is checked against :data:`tfnhr.ranges.TRAIN` (``ValueError`` naming it).
    """

    data: Path
    out: Path = Path("runs/recognizer")
    kind: str = "lines"
    split: str = "official"
    keep_err: bool = False
    preset: str = DEFAULT_MODEL_PRESET
    mdlstm_units: tuple[int, ...] | None = None
    conv_filters: tuple[int, ...] | None = None
    block: tuple[tuple[int, int], ...] = ((2, 4), (2, 4))
    dropout: float = 0.25
    cell: str = "leaky_lp"
    height: int | None = None
    batch_pixels: int | None = None
    epochs: int = 80
    learning_rate: float = 0.005
    optimizer: str | dict = "adam"
    clipnorm: float | None = 10.0
    halve_on: str = "either"
    halve_start: float | None = 0.5
    halve_patience: int = 2
    halve_margin: float = 1.0
    augment: str = "default"
    validate_every: int | None = None
    anneal: float | None = 0.5
    sort_window: int = 1
    ema: float | None = 0.99
    confidence_penalty: float = 0.1
    normalize_spacing: bool = False
    threads: int | None = None
    mixed_precision: bool = False
    seed: int = 0
    max_train: int | None = None
    max_val: int | None = None
    time_limit: float | None = None
    resume: bool = False
    overwrite: bool = False
    verbose: int = 1
    network: dict | None = None
    network_source: str | None = None

    def __post_init__(self) -> None:
        if self.augment not in AUGMENT_LEVELS:
            raise ValueError(f"augment must be one of {AUGMENT_LEVELS}, got {self.augment!r}")
        for field, allowed in ranges.TRAIN.items():
            allowed.check(field, getattr(self, field))
        ranges.check_each("mdlstm_units", self.mdlstm_units, ranges.COUNT)
        ranges.check_each("conv_filters", self.conv_filters, ranges.COUNT)


def resolve_options(defaults: Mapping, config: NetworkConfig | None, given: Mapping,
                    names: Mapping[str, str] | None = None) -> TrainOptions:
    """:class:`TrainOptions` from ``defaults`` (fields every run sets: ``data``, ``out``, ...),
    then ``config``'s training parameters and network (if any), then ``given`` (fields a user set
    explicitly, e.g. from flags); later ones win. ``ValueError`` for ``given`` model fields
    combined with a config (it describes the network), naming the field as ``names`` says (the
    caller's name for it, e.g. its flag)."""
    values = dict(defaults)
    if config is not None:
        model_fields = [field for field in MODEL_FIELDS if field in given]
        if model_fields:
            name = (names or {}).get(model_fields[0], model_fields[0])
            raise ValueError(f"the config file {config.source} describes the network; {name} cannot be combined with it")
        values.update(network=config.network, network_source=str(config.source))
        values.update({CONFIG_FIELDS[key]: SCHEDULES[value] if key == "schedule" else value
                       for key, value in config.training.items()})
    values.update(given)
    return TrainOptions(**values)
