"""The names that options may take (and the defaults that several places share), in one place,
free of TensorFlow.

The library checks values against these and the command lines offer them as ``choices`` (so
``--help`` needs no TensorFlow). A name added here must be handled where the tuple is used.
"""

from __future__ import annotations

from pathlib import Path

CELLS = ("leaky_lp", "leaky_lp_new_state", "lstm")
"""MDLSTM cells (:mod:`tfnhr.layers.mdlstm_cells`): Leaky LP (Wenniger et al. 2019, §III), Leaky LP
computing its new state, and the plain MDLSTM cell."""

PACKING_MODES = ("examples", "pad")
"""How :class:`~tfnhr.layers.MDLSTM2D` batches examples: packed onto canvases, or padded."""

MODEL_PRESET_SIZES: dict[str, dict[str, tuple[int, ...]]] = {
    "small": {"mdlstm_units": (2, 10, 50), "conv_filters": (6, 20)},
    "small-wide": {"mdlstm_units": (4, 10, 50), "conv_filters": (12, 20)},
    "large": {"mdlstm_units": (4, 20, 100), "conv_filters": (12, 40)},
    "small-stem": {"mdlstm_units": (10, 50), "conv_filters": (12, 20), "stem_filters": (8, 16)},
    "stem-80": {"mdlstm_units": (12, 80), "conv_filters": (16, 32), "stem_filters": (8, 16)},
}
"""The hand-built recognizer's sizes, MDLSTM units per level and block-convolution filters (and
the filters of a convolutional stem, where there is one): ``small`` and ``large`` are those of
Wenniger et al. 2019 (§VII), ``small-wide`` is ``small`` with its first level twice as wide,
``small-stem`` is ``small-wide`` with two 3x3 convolutions in place of its first MDLSTM level,
``stem-80`` ``small-stem`` with wider levels (2.5x the parameters, 1.4x the step time)
(:data:`tfnhr.models.recognizer.PRESETS`)."""

MODEL_PRESETS = tuple(MODEL_PRESET_SIZES)
"""The names of :data:`MODEL_PRESET_SIZES`."""

TRAIN_FONT_SETS = ("core", "all")
"""Training-font sets of the synthetic handwriting (:func:`tfnhr.data.synthetic.handwriting.font_paths`): the
core hands, or all bundled training hands (the core ones and the more of
:data:`tfnhr.data.synthetic.handwriting.MORE_TRAIN_FONTS`). Validation and test fonts are the same in both."""

MAIN_JOB_PRESETS: dict[str, dict] = {
    "quick": {"train": 9000, "val": 200, "test": 200, "time_limit": 15.0, "epochs": 80, "validate_lines": 1100,
              "model": "small-stem", "train_fonts": "core", "anneal": 0.7},
    "full": {"train": 10000, "val": 400, "test": 400, "time_limit": 49.0, "epochs": 80, "validate_lines": 2200,
             "model": "stem-80", "train_fonts": "all", "anneal": 0.5},
}
"""Data sizes (lines), training limits (minutes, epochs), training lines between validations, the
recognizer size (:data:`MODEL_PRESET_SIZES`), the training fonts (:data:`TRAIN_FONT_SETS`) and the
fraction of the time limit from which the learning rate is annealed (``anneal``,
:class:`~tfnhr.training.callbacks.TimeBudgetAnnealing`) of the main job's two presets (:mod:`tfnhr.commands.main_job`, ``--preset``); the peer benchmark
(``benchmarks/accuracy_vs_peer.py``) takes its defaults from ``quick``. ``quick`` trains 15
minutes: with the evaluation's beam searches and the rendering on every core, ``make demo`` then
stays within its 20 minutes (docs/results.md#main-job-make-demo). At ``quick``'s budget a larger
set of hands read the validation fonts level and the test fonts 1.5-2.1 points worse than the core
ones (docs/lab/fonts-and-data.md); at ``full``'s budget ``stem-80`` on all hands read the
validation fonts 0.9-1.2 points and the test fonts 0.3-0.9 points better than ``small-stem`` on
the core ones (one sample each, 60 training minutes; docs/lab/main-job-full.md). ``full`` trains
49 minutes so that ``make demo-full`` fits in an hour in all with its evaluation in 24 views
(docs/results.md#full-main-job-make-demo-full)."""

MAIN_JOB_HEIGHT = 36
"""The main job's line height (px; both presets): its lines are scaled to it. Characters are then
~10 px wide, ~2.6 output columns each after the two 2x2 block convolutions. In 14 training
minutes 36 px read the held-out fonts better than 28, 32 and 44 px and as well as 40 px (one thread,
two seeds), and better than 32 px on both cores on three seeds, though each round takes 1.33x as
long (docs/lab/fonts-and-data.md, "Line height")."""

MAIN_JOB_BLOCKS = ((2, 2), (2, 2))
"""The kernel = stride (height, width) of the main job's two block convolutions."""

MAIN_JOB_BATCH_PIXELS = 190_000
"""The main job's default pixel budget of one worker's batch: about 11 lines of
:data:`MAIN_JOB_HEIGHT`."""

MAIN_JOB_PIXELS_PER_LINE = 16_500
"""About how much of a batch's pixel budget one synthetic line of :data:`MAIN_JOB_HEIGHT` takes
(its ~14,300 pixels and its share of the packing's skew and gaps): :data:`MAIN_JOB_BATCH_PIXELS`
hold about 11 lines. The main job turns its validation interval from lines into updates with it."""


def describe_presets() -> str:
    """The presets' sizes for help texts: ``small = (2, 10, 50) / (6, 20), ..., small-stem = stem
    (8, 16), (10, 50) / (12, 20)``."""
    return ", ".join(f"{name} = {'stem ' + str(sizes['stem_filters']) + ', ' if 'stem_filters' in sizes else ''}"
                     f"{sizes['mdlstm_units']} / {sizes['conv_filters']}" for name, sizes in MODEL_PRESET_SIZES.items())


DEFAULT_MODEL_PRESET = "small-wide"
"""The size ``tfnhr train`` and the Horovod job train by default (the main job's are in
:data:`MAIN_JOB_PRESETS`)."""

KINDS = ("lines", "words")
"""Line or word images of a data set in IAM layout."""

DATA_KINDS = (*KINDS, "pages")
"""What a data folder holds: IAM-layout line or word images, or page images with PAGE-XML/ALTO
files (:mod:`tfnhr.data.pages.reading`; a folder without ``ascii/`` that holds such files is read as pages
whatever the kind)."""


def example_noun(kind: str) -> str:
    """What the examples of a data kind are called in messages: pages give lines."""
    return "lines" if kind == "pages" else kind

PAGE_LAYOUTS = ("page", "page-2013", "alto", "alto-2")
"""Layout files ``tfnhr synth --layout`` writes: PAGE-XML 2019 or 2013, ALTO v4 or v2."""

SUBSETS = ("train", "val", "test")
"""The subsets of a data set."""

SOURCES = ("iam", "synthetic")
"""What ``tfnhr convert --from`` reads: a folder in IAM layout, or one that ``tfnhr synth`` wrote."""

COMPRESSIONS = ("none", "gzip")
"""Pixel compressions of HDF5 text-image files."""

HALVE_ON = ("either", "both", "cer", "wer", "never")
"""When the learning rate is halved (Wenniger et al. 2019, §VI): when the validation CER or WER
(either), both, one of them, or never (a constant rate) gets worse than the best epoch's."""

SCHEDULES = {"halve_on_either": "either", "halve_on_both": "both", "halve_on_cer": "cer",
             "halve_on_wer": "wer", "constant": "never"}
"""A config file's ``schedule`` names -> the :data:`HALVE_ON` rule."""

AUGMENT_LEVELS = ("none", "light", "default", "strong")
"""Training-time augmentation levels (:mod:`tfnhr.data.augment`): none, or distortions of growing
strength."""

OPTIMIZERS = ("adam", "sgd", "rmsprop", "nadam", "adagrad", "adadelta")
"""Optimizer names of config files and ``--optimizer``."""

DECODERS = ("greedy", "beam", "beam+lm")
"""CTC decoders (:func:`tfnhr.decoding.make_decoder`)."""

LM_BACKGROUND_LANGUAGES = ("ar", "bg", "bn", "ca", "cs", "da", "de", "el", "en", "es", "fa", "fi", "fil", "fr", "he",
                           "hi", "hu", "id", "is", "it", "ja", "ko", "lt", "lv", "mk", "ms", "nb", "nl", "pl", "pt",
                           "ro", "ru", "sh", "sk", "sl", "sv", "ta", "tr", "uk", "ur", "vi", "zh")
"""Languages whose word frequencies can back a word LM (``tfnhr lm build --background``,
:mod:`tfnhr.lm.background`): those wordfreq 3.1 has lists of (ISO 639 codes)."""

DEFAULT_BACKGROUND_WORDS = 100_000
"""Words of an LM's background taken by default: the language's most frequent ones."""

RECOGNIZE_FORMATS = ("text", "tsv", "json", "jsonl")
"""Output formats of ``tfnhr recognize``."""

DEVICES = ("auto", "cpu", "gpu")
"""Where a command runs its model: a GPU if TensorFlow sees one, the CPU, or a GPU (required)."""

SYNC_MODES = ("gradients", "average")
"""How Horovod workers keep in step: gradients averaged every step, or model averaging."""

DEFAULT_BATCH_PIXELS = 400_000
"""Pixel budget of one inference batch (evaluate, recognize, serve, dump)."""

SHIPPED_CONFIGS = Path(__file__).parent.parent / "network" / "configs"
"""The folder of the network config files that come with tfnhr."""


def shipped_configs() -> list[str]:
    """Names of the config files that come with tfnhr (``small``, ``large``, ...)."""
    return sorted(path.stem for path in SHIPPED_CONFIGS.glob("*.json"))

ENSEMBLE_WIDTHS = (0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4)
"""Factors of an image's width that ``--widths default`` reads it at (:mod:`tfnhr.recognition.views`):
chosen on the validation sets of the main job's fonts and of handwritten digit lines, where it
lowered or kept every CER and gained the most points in all (narrower factors suit the digits,
wider ones the main job's narrow validation hand)."""
ENSEMBLE_SHEARS = (-0.2, 0.0, 0.2)
"""Shears (px per px of height) that ``--shears default`` reads a line at, each at every width
(:mod:`tfnhr.recognition.views`): of the sets measured on validation lines with the 8 default
widths (±0.1, ±0.2, both), the one with the largest summed gain (docs/lab/width-ensemble.md)."""
