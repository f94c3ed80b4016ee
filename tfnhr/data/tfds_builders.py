"""TensorFlow Datasets builders: ``iam_lines``, ``iam_words`` and ``tfnhr_synthetic``.

Importing this module registers them, so ``tfds.load`` / ``tfds.builder`` find them by name. None
needs a network: the IAM builders read a user-supplied IAM folder given as the manual dir, e.g.::

    tfds.load("iam_lines", data_dir=..., download_and_prepare_kwargs={
        "download_config": tfds.download.DownloadConfig(manual_dir="/data/iam")})

Every example is ``{"image": uint8 [H, W, 1] gray (0 = ink, 255 = paper), "text": str,
"id": str}``; splits are ``train``, ``validation`` and ``test``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow_datasets as tfds

from tfnhr.data.formats import iam
from tfnhr.data.synthetic import handwriting
from tfnhr.data.images import load_gray

TFDS_SPLITS = {"train": "train", "validation": "val", "test": "test"}
"""TFDS split name -> the subset name used by :mod:`tfnhr.data.formats.iam` and the synthetic generator."""


def _manual_instructions(kind: str) -> str:
    return f"""\
    IAM needs registration at {iam.IAM_HOMEPAGE}. Download there and unpack into
    the manual dir (`manual_dir`):
      ascii.tgz  -> <manual_dir>/ascii/  (ascii/{kind}.txt is read)
      {kind}.tgz  -> <manual_dir>/{kind}/  (e.g. {kind}/a01/a01-000u/a01-000u-00*.png)
      largeWriterIndependentTextLineRecognitionTask.zip
                 -> <manual_dir>/largeWriterIndependentTextLineRecognitionTask/
                    (trainset.txt, validationset1.txt, testset.txt)
    Validation is validationset1; rows marked `err` and rows without an image are left out.
    """


class _TextImageBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """A builder of ``{"image", "text", "id"}`` examples, described by ``DESCRIPTION`` and
    ``HOMEPAGE``."""

    VERSION = tfds.core.Version("1.0.0")
    DESCRIPTION: str
    HOMEPAGE: str | None = None
    url_infos = None
    """Nothing is downloaded, so there are no URL checksums (and tfds need not look for a
    checksums file, which would go through the ``importlib_resources`` package)."""

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=self.DESCRIPTION,
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(None, None, 1), dtype=np.uint8),
                "text": tfds.features.Text(),
                "id": tfds.features.Text(),
            }),
            supervised_keys=("image", "text"),
            homepage=self.HOMEPAGE,
        )


class _IamBuilder(_TextImageBuilder, skip_registration=True):
    """IAM lines or words (``KIND``) with the official writer-independent split."""

    KIND: str
    HOMEPAGE = iam.IAM_HOMEPAGE
    RELEASE_NOTES = {"1.0.0": "Official largeWriterIndependentTextLineRecognitionTask split."}

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        root = dl_manager.manual_dir
        return {name: self._generate_examples(root, subset) for name, subset in TFDS_SPLITS.items()}

    def _generate_examples(self, root, subset: str):
        for sample in iam.load_samples(root, self.KIND, subset):
            yield sample.id, {"image": load_gray(sample.image_path)[..., None],
                              "text": sample.text, "id": sample.id}


class IamLines(_IamBuilder):
    """IAM text lines (``iam_lines``)."""

    KIND = "lines"
    DESCRIPTION = "IAM Handwriting Database lines: gray images and their transcriptions."
    MANUAL_DOWNLOAD_INSTRUCTIONS = _manual_instructions(KIND)


class IamWords(_IamBuilder):
    """IAM words (``iam_words``); each word is in the split of its line."""

    KIND = "words"
    DESCRIPTION = "IAM Handwriting Database words: gray images and their transcriptions."
    MANUAL_DOWNLOAD_INSTRUCTIONS = _manual_instructions(KIND)


@dataclasses.dataclass(eq=False)
class SyntheticConfig(tfds.core.BuilderConfig):
    """``kind``: ``"lines"`` or ``"words"``; ``sizes``: examples per TFDS split; ``seed``: the
    generator seed (the same config always yields the same examples)."""

    kind: str = "lines"
    sizes: dict[str, int] = dataclasses.field(
        default_factory=lambda: {"train": 1000, "validation": 100, "test": 100})
    seed: int = 0


class TfnhrSynthetic(_TextImageBuilder):
    """Synthetic handwriting-style lines or words rendered by :mod:`tfnhr.data.synthetic.handwriting`
    (``tfnhr_synthetic``; configs ``lines`` and ``words``)."""

    DESCRIPTION = "Synthetic handwriting-style text images (tfnhr.data.synthetic.handwriting)."
    RELEASE_NOTES = {"1.0.0": "Lines and words from tfnhr.data.synthetic.handwriting.generate."}
    BUILDER_CONFIGS = [
        SyntheticConfig(name="lines", description="Text lines.", kind="lines"),
        SyntheticConfig(name="words", description="Single words.", kind="words",
                        sizes={"train": 2000, "validation": 200, "test": 200}),
    ]

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        return {name: self._generate_examples(name) for name in self.builder_config.sizes}

    def _generate_examples(self, name: str):
        config = self.builder_config
        subset = TFDS_SPLITS[name]
        examples = handwriting.generate(config.sizes[name], seed=config.seed, kind=config.kind,
                                      split=subset)
        for index, (gray, text) in enumerate(examples):
            sample_id = f"{subset}-{index:06d}"
            yield sample_id, {"image": gray[..., None], "text": text, "id": sample_id}
