"""What a recognizer training run is told: :class:`TrainOptions`, each option declared once.

Every field is declared with :func:`~tfnhr.config.options.option`: its default, its help, its
range or choices, its flag and its config-file key. The ``tfnhr train`` and ``train.py --task
nhr`` command lines (:func:`add_train_arguments`), the range checks, the defaults that ``--help``
shows, the training keys of config files (:mod:`tfnhr.network.config_file`) and the flags of the
main job's workers (:func:`~tfnhr.config.options.option_flags`) are all generated from these
declarations, so an option is added by adding one field here. TensorFlow-free.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from tfnhr.config.choices import (AUGMENT_LEVELS, CELLS, DATA_KINDS, DEFAULT_MODEL_PRESET, HALVE_ON, MODEL_PRESETS,
                                  OPTIMIZERS, SCHEDULES, describe_presets, shipped_configs)
from tfnhr.config.options import NO_FLAG, add_option_arguments, check_ranges, option
from tfnhr.config.ranges import COUNT, NONNEGATIVE_COUNT, POSITIVE, PROBABILITY_BELOW_ONE, Range


def size_pair(text: str) -> tuple[int, int]:
    """``"2x4"`` -> ``(2, 4)`` (block height x width, pixels); argparse ``type``."""
    try:
        height, width = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HxW such as 2x4, got {text!r}") from None
    if height < 1 or width < 1:
        raise argparse.ArgumentTypeError(f"block sizes must be positive, got {text!r}")
    return height, width


def both_blocks(sizes: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """``--block``'s one or two sizes -> the sizes of both block convolutions; ``ValueError`` for more."""
    if len(sizes) > 2:
        raise ValueError(f"--block takes one or two HxW sizes, got {len(sizes)}")
    return tuple(sizes) * (2 if len(sizes) == 1 else 1)


def block_words(blocks: tuple[tuple[int, int], ...]) -> list[str]:
    """Block sizes as ``--block`` takes them: ``["2x4", "2x4"]``."""
    return [f"{height}x{width}" for height, width in blocks]


def names_an_optimizer(value: object) -> bool:
    """A config file's ``optimizer``: a name of :data:`~tfnhr.config.choices.OPTIMIZERS`, or a
    mapping whose ``class`` is one."""
    name = value.get("class") if isinstance(value, dict) else value
    return isinstance(name, str) and name.lower() in OPTIMIZERS


@dataclasses.dataclass
class TrainOptions:
    """What to train on and how. Every field is a ``tfnhr train`` option (the flag is the field's
    name with dashes unless its declaration names another); its help says what it does. Every
    value is checked against its declared range or choices when the options are made
    (``ValueError`` naming the field)."""

    data: Path = option(
        dataclasses.MISSING,
        "folder in IAM layout (ascii/, lines/ or words/, split files), a folder of page images with PAGE-XML or "
        "ALTO files (read as pages when it has no ascii/), or an .h5/.hdf5 file from tfnhr convert (--kind, --split "
        "and --keep-err were fixed when it was converted)", parse=Path)
    out: Path = option(Path("runs/recognizer"), "output folder", parse=Path)
    kind: str = option("lines", "IAM line or word images, or text lines cut from pages (PAGE-XML/ALTO)",
                       choices=DATA_KINDS)
    split: str = option(
        "official", "'official' (IAM: largeWriterIndependentTextLineRecognitionTask/; pages: train/ valid/ test/ "
        "subfolders, else seeded:0), 'seeded:SEED' (pages: 80/10/10 by page) or a folder with train/valid/test id "
        "lists (line/form ids, or page ids for pages; e.g. the 6161/966/2915 split of Wenniger et al. 2019)")
    keep_err: bool = option(False, "keep rows whose IAM segmentation is 'err'")
    preset: str = option(DEFAULT_MODEL_PRESET, f"model size, MDLSTM units / block-conv filters: {describe_presets()}",
                         choices=MODEL_PRESETS, given_only=True, model=True)
    mdlstm_units: tuple[int, ...] | None = option(
        None, "MDLSTM units per level (overrides --preset; one more level than block convolutions drops a stem "
        "preset's stem)", flag="--units", each=COUNT, given_only=True, model=True)
    conv_filters: tuple[int, ...] | None = option(None, "block-conv filters (overrides --preset)", flag="--filters",
                                                  each=COUNT, given_only=True, model=True)
    block: tuple[tuple[int, int], ...] = option(
        ((2, 4), (2, 4)), "block-conv kernel=stride HxW: one for both convolutions, or one each", parse=size_pair,
        nargs="+", convert=both_blocks, format=block_words, given_only=True, model=True)
    dropout: float = option(0.25, "dropout on MDLSTM outputs", range=PROBABILITY_BELOW_ONE, given_only=True,
                            model=True)
    cell: str = option("leaky_lp", "MDLSTM cell", choices=CELLS, given_only=True, model=True)
    height: int | None = option(None, "scale images to this height (px; default: keep)",
                                range=Range(1, integer=True, none=True), given_only=True, config="height",
                                config_unit="pixels; null: keep every image's height")
    batch_pixels: int | None = option(
        None, "pixel budget of one batch, after scaling (default: 12 training examples of median size, at least 2 "
        "of the largest)", range=Range(1, integer=True, none=True), given_only=True, config="batch_pixels",
        config_unit="pixels per batch; null: 12 median examples")
    epochs: int = option(80, "maximum epochs", range=COUNT, given_only=True, config="epochs",
                         config_unit="passes over the training set")
    learning_rate: float = option(0.005, "learning rate", flag="--lr", range=POSITIVE, given_only=True,
                                  config="learning_rate", config_unit="the optimizer's step size")
    optimizer: str | dict = option("adam", "optimizer", choices=OPTIMIZERS, given_only=True, config="optimizer",
                                   config_check=names_an_optimizer,
                                   config_unit=f"one of {', '.join(OPTIMIZERS)} or a mapping with such a 'class'")
    clipnorm: float | None = option(10.0, "gradient global-norm clipping", range=Range(0, low_open=True, none=True),
                                    given_only=True, config="gradient_clip",
                                    config_unit="global gradient norm; null: no clipping")
    halve_on: str = option(
        "either", "halve the LR (reset the optimizer, restore the best weights) when the validation CER/WER get "
        "worse than the best epoch's: either of them, both, one, or never (constant LR)", choices=HALVE_ON,
        given_only=True, config="schedule", config_names=SCHEDULES)
    halve_start: float | None = option(
        0.5, "halving starts once the validation CER is below this fraction of the first validation's (the model "
        "has left CTC's blank phase); 'none': from the start", range=Range(0, 1, low_open=True, none=True),
        given_only=True, config="halve_start",
        config_unit="fraction of the first validation's CER; null: from the start")
    halve_patience: int = option(2, "worse validations in a row before halving, at least one epoch's worth",
                                 range=COUNT, given_only=True, config="halve_patience", config_unit="validations")
    halve_margin: float = option(
        1.0, "a validation counts as worse only when its CER/WER exceeds the best's by more than this many binomial "
        "standard errors over the validation set's characters/words; 0: any increase", range=Range(0, 10),
        metavar="STANDARD_ERRORS", given_only=True, config="halve_margin", config_unit="standard errors")
    augment: str = option("default", "training-time image augmentation level", choices=AUGMENT_LEVELS,
                          given_only=True, config="augment")
    validate_every: int | None = option(
        None, "validate (log, checkpoint, maybe halve) every N updates instead of every epoch",
        range=Range(1, integer=True, none=True), metavar="UPDATES", given_only=True, config="validate_every",
        config_unit="updates; null: every epoch")
    anneal: float | None = option(
        0.5, "with --time-limit: lower the learning rate linearly to 1/20 from this fraction of the limit on; "
        "'none': keep it", range=Range(0, 1, high_open=True, none=True), metavar="FRACTION", given_only=True,
        config="anneal", config_unit="fraction of the time limit; null: no annealing")
    sort_window: int = option(
        1, "batch lines of similar widths, sorted within windows of this many batches: less padding and faster "
        "steps, but the main job learned worse with 8 (docs/lab/main-job.md); 1: random batches", range=COUNT,
        metavar="BATCHES", given_only=True, config="sort_window",
        config_unit="batches per width-sorting window; 1: random batches")
    ema: float | None = option(
        0.99, "validate, checkpoint and keep a moving average of the weights over the updates (0.99: about the "
        "last 100); 'none': the last update's weights", range=Range(0, 1, high_open=True, none=True),
        metavar="MOMENTUM", given_only=True, config="ema",
        config_unit="momentum of the weight average; null: the last update's weights")
    confidence_penalty: float = option(
        0.1, "subtract WEIGHT times the entropy of the output columns from each line's CTC loss, so that the model "
        "is less sure of its readings (unseen handwritten digits read better: docs/lab/training-recipe.md); "
        "0: CTC alone",
        range=Range(0, 10), metavar="WEIGHT", given_only=True, config="confidence_penalty",
        config_unit="weight of the output columns' entropy")
    normalize_spacing: bool = option(
        False, "scale every line's width so that its vertical strokes lie the training lines' median distance "
        "apart, in training and when the model reads (docs/recognizer.md)", given_only=True,
        config="normalize_spacing")
    threads: int | None = option(
        None, "TensorFlow threads of this process (default: every core it may use; under Horovod each worker's "
        "share, cores / workers on the host; also written none); 0: TensorFlow's default",
        range=Range(0, integer=True, none=True))
    mixed_precision: bool = option(
        False, "compute in float16 on a GPU, bfloat16 on a CPU (variables, the MDLSTM recurrence and CTC stay "
        "float32); a resumed run keeps its model's policy")
    seed: int = option(0, "weights and shuffling seed", range=NONNEGATIVE_COUNT, given_only=True, config="seed",
                       config_unit="random seed")
    max_train: int | None = option(None, "use only the first N training samples",
                                   range=Range(1, integer=True, none=True))
    max_val: int | None = option(None, "use only the first N validation samples",
                                 range=Range(1, integer=True, none=True))
    time_limit: float | None = option(None, "minutes; stop at the end of the epoch that passes it (0: after the "
                                            "first epoch)", range=Range(0, none=True))
    resume: bool = option(False, "continue from --out's last.keras/state.json")
    overwrite: bool = option(False, "replace the run already in --out (without --resume or this, such a folder is "
                                    "refused)")
    verbose: int = option(1, "no progress output", flag="--quiet", const=0)
    network: dict | None = option(None, "a config file's network description, built instead of the preset "
                                        "recognizer", flag=NO_FLAG)
    network_source: str | None = option(None, "the config file the network comes from", flag=NO_FLAG)

    def __post_init__(self) -> None:
        check_ranges(self)


DATA_FIELDS = ("data", "kind", "split", "keep_err")
"""The fields that select a data set, offered by every command that reads one (train, evaluate, dump)."""


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """``--data``, ``--kind``, ``--split`` and ``--keep-err`` as :class:`TrainOptions` declares them."""
    add_option_arguments(parser, TrainOptions, DATA_FIELDS)


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``tfnhr train``, also offered by ``train.py --task nhr``: every declared
    field of :class:`TrainOptions` and ``--config``. The ``given_only`` ones stay unset unless
    given, so that their defaults come from ``--config`` or the declarations
    (:func:`tfnhr.training.options_from_args`)."""
    add_data_arguments(parser)
    add_option_arguments(parser, TrainOptions, ("out",))
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="a JSON/YAML file describing the network and training parameters, or a shipped "
                             f"config ({', '.join(shipped_configs())}); flags given here override its "
                             "training parameters")
    rest = [field.name for field in dataclasses.fields(TrainOptions) if field.name not in (*DATA_FIELDS, "out")]
    add_option_arguments(parser, TrainOptions, rest)
