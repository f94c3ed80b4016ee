"""TFDS builders, offline: ``iam_lines`` / ``iam_words`` from the miniature IAM tree and a tiny
``tfnhr_synthetic`` config."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow_datasets as tfds

from tests.helpers.iam_tree import write_iam_tree
from tfnhr.data.formats import iam
from tfnhr.data.synthetic import handwriting
from tfnhr.data.formats.iam import SkippedSamplesWarning
from tfnhr.data.tfds_builders import TFDS_SPLITS, SyntheticConfig


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return write_iam_tree(tmp_path_factory.mktemp("iam"))


def load_examples(name: str, data_dir, **load_kwargs) -> dict[str, dict[str, tuple]]:
    """``tfds.load(name)`` as ``{split: {id: (text, uint8 [H, W, 1] image)}}``."""
    datasets = tfds.load(name, data_dir=data_dir, **load_kwargs)
    return {split: {example["id"].decode(): (example["text"].decode(), example["image"])
                    for example in tfds.as_numpy(dataset)}
            for split, dataset in datasets.items()}


EXPECTED_IDS = {  # the tree's official split without err rows and missing or empty images
    "lines": {"train": {"a01-000u-00", "a01-000u-01"}, "validation": {"a01-007-00"},
              "test": {"b02-010-00"}},
    "words": {"train": {"a01-000u-00-00", "a01-000u-01-00"}, "validation": {"a01-007-00-00"},
              "test": {"b02-010-00-01"}},
}


@pytest.mark.parametrize("kind", iam.KINDS)
def test_iam_builder_matches_the_tree(tree, tmp_path, kind):
    download_config = tfds.download.DownloadConfig(manual_dir=str(tree.root))
    with pytest.warns(SkippedSamplesWarning):  # the tree's missing and empty images
        examples = load_examples(f"iam_{kind}", tmp_path, download_and_prepare_kwargs={
            "download_config": download_config})
    texts = {record.id: record.text
             for record in iam.parse_transcriptions(tree.root / "ascii" / f"{kind}.txt", kind)}
    assert {split: set(by_id) for split, by_id in examples.items()} == EXPECTED_IDS[kind]
    for by_id in examples.values():
        for sample_id, (text, image) in by_id.items():
            assert text == texts[sample_id]
            assert image.dtype == np.uint8
            np.testing.assert_array_equal(image, tree.images[sample_id][..., None])


def test_iam_builder_without_iam_folder_explains(tmp_path):
    manual_dir = tmp_path / "manual"
    manual_dir.mkdir()
    builder = tfds.builder("iam_lines", data_dir=tmp_path / "data")
    config = tfds.download.DownloadConfig(manual_dir=str(manual_dir))
    with pytest.raises(AssertionError, match=r"(?s)registration at https://fki.*ascii\.tgz"):
        builder.download_and_prepare(download_config=config)  # empty manual dir
    (manual_dir / "iam.zip").write_bytes(b"PK")
    with pytest.raises(FileNotFoundError, match="not an IAM folder"):
        builder.download_and_prepare(download_config=config)


def test_synthetic_builder_is_deterministic(tmp_path):
    sizes = {"train": 3, "validation": 2, "test": 2}
    config = SyntheticConfig(name="tiny", kind="lines", sizes=sizes, seed=5)
    first = load_examples("tfnhr_synthetic", tmp_path / "a", builder_kwargs={"config": config})
    second = load_examples("tfnhr_synthetic", tmp_path / "b", builder_kwargs={"config": config})
    for split, subset in TFDS_SPLITS.items():
        expected = handwriting.generate(sizes[split], seed=5, kind="lines", split=subset)
        assert len(first[split]) == len(second[split]) == sizes[split]
        for index, (gray, text) in enumerate(expected):
            sample_id = f"{subset}-{index:06d}"
            for examples in (first, second):
                got_text, got_image = examples[split][sample_id]
                assert got_text == text and text.strip()
                np.testing.assert_array_equal(got_image, gray[..., None])


def test_synthetic_words_config(tmp_path):
    config = SyntheticConfig(name="tiny_words", kind="words",
                             sizes={"train": 2, "validation": 1, "test": 1})
    examples = load_examples("tfnhr_synthetic", tmp_path, builder_kwargs={"config": config})
    texts = [text for split in examples.values() for text, _ in split.values()]
    assert len(texts) == 4 and all(text and text == text.strip() for text in texts)
