"""HDF5 data sets and activation dumps: the text-image format against raw h5py both ways,
``tfnhr convert`` on a tiny synthetic set, folder/HDF5 equivalence, training on a file,
truncated and damaged files, and ``tfnhr dump`` against independently computed layer outputs."""

from __future__ import annotations

import json
import shutil
import warnings
import zlib

import h5py
import numpy as np
import pytest

from tests.helpers.ragged import ragged_stack
from tests.helpers.tiny_models import TINY_MODEL
from tfnhr.recognition.dumps import load_activations
from tfnhr.cli import main
from tfnhr.data.formats.hdf5 import CHUNK_BYTES, Hdf5FormatError, TextImageWriter, load_hdf5_set
from tfnhr.data.images import scale_to_height, to_ink
from tfnhr.data.sources import load_data_subset
from tfnhr.recognition.transcriber import Transcriber
from tfnhr.models import load_recognizer


def _crc(strings) -> int:
    crc = 0
    for text in strings:
        crc = zlib.crc32(text.encode("utf-8") + b"\0", crc)
    return crc


def _examples(seed: int = 0):
    """(ids, texts, uint8 grays) with edge shapes, non-ASCII text and one image of more than a chunk."""
    rng = np.random.default_rng(seed)
    shapes = [(1, 1), (1, 37), (29, 1), (17, 230), (64, 1100), (1024, 1100), (3, 5)]
    grays = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in shapes]
    ids = [f"x{i:02d}-000-{i:02d}" for i in range(len(grays))]
    texts = ["a", "Grüße, «quoted»", "x y", "naïve café", "long " * 40, "€ 5", "."]
    return ids, texts, grays


def _write_raw(path, subsets: dict, offsets: bool = True, version: int = 1) -> None:
    """A text-image file written with h5py alone, as the module docstring describes it."""
    with h5py.File(path, "w") as file:
        file.attrs["format"], file.attrs["format_version"] = "tfnhr-text-images", version
        for name, (ids, texts, grays) in subsets.items():
            group = file.create_group(name)
            group["inputs"] = np.concatenate([gray.ravel() for gray in grays])
            group["seqLengths"] = np.array([gray.shape for gray in grays], np.int64)
            if offsets:
                group["offsets"] = np.cumsum([0] + [gray.size for gray in grays])
            group.create_dataset("seqTags", data=ids, dtype=h5py.string_dtype())
            group.create_dataset("labels", data=texts, dtype=h5py.string_dtype())


def _assert_same_set(loaded, ids, texts, grays):
    assert loaded.ids == list(ids) and loaded.texts == list(texts)
    assert len(loaded.images) == len(grays)
    for image, gray in zip(loaded.images, grays):
        assert image.dtype == np.uint8
        np.testing.assert_array_equal(image, gray)


# ------------------------------------------------------------------------ format, both ways

def test_writer_output_read_back_with_raw_h5py(tmp_path):
    ids, texts, grays = _examples()
    assert grays[-2].size > CHUNK_BYTES  # the writer's buffer flushes inside this example
    path = tmp_path / "set.h5"
    with TextImageWriter(path, source="unit test") as writer:
        for i, (sample_id, text, gray) in enumerate(zip(ids, texts, grays)):
            writer.add("train" if i % 3 else "test", sample_id, text, gray)
        summary = writer.close()
    parts = {"train": [i for i in range(len(ids)) if i % 3], "test": [i for i in range(len(ids)) if not i % 3]}
    assert summary == {name: {"examples": len(part), "pixels": sum(grays[i].size for i in part)}
                       for name, part in parts.items()}
    assert [p.name for p in tmp_path.iterdir()] == ["set.h5"]  # no temporary file left

    with h5py.File(path, "r") as file:
        assert file.attrs["format"] == "tfnhr-text-images" and file.attrs["format_version"] == 1
        assert file.attrs["source"] == "unit test" and "h5py" in file.attrs["creator"]
        for name, part in parts.items():
            group = file[name]
            np.testing.assert_array_equal(group["inputs"][()], np.concatenate([grays[i].ravel() for i in part]))
            np.testing.assert_array_equal(group["seqLengths"][()], [grays[i].shape for i in part])
            np.testing.assert_array_equal(group["offsets"][()], np.cumsum([0] + [grays[i].size for i in part]))
            assert group["inputs"].dtype == np.uint8 and group["seqLengths"].dtype == np.int32
            assert group["seqTags"].asstr()[()].tolist() == [ids[i] for i in part]
            assert group["labels"].asstr()[()].tolist() == [texts[i] for i in part]
            assert group.attrs["seqTags_crc32"] == _crc(ids[i] for i in part)
            assert group.attrs["labels_crc32"] == _crc(texts[i] for i in part)

    train = [[values[i] for i in parts["train"]] for values in (ids, texts, grays)]
    _assert_same_set(load_hdf5_set(path, "train"), *train)
    _assert_same_set(load_hdf5_set(path, "train", limit=2), *(values[:2] for values in train))
    scaled = load_hdf5_set(path, "train", height=12)
    for image, gray in zip(scaled.images, train[2]):
        np.testing.assert_array_equal(image, scale_to_height(gray, 12))


def test_raw_h5py_file_in_the_documented_layout_loads(tmp_path):
    ids, texts, grays = _examples(seed=1)
    for offsets in (True, False):  # offsets and checksums are optional for other writers
        path = tmp_path / f"raw_{offsets}.hdf5"
        _write_raw(path, {"val": (ids, texts, grays), "train": (ids[:2], texts[:2], grays[:2])}, offsets=offsets)
        _assert_same_set(load_data_subset(path, "val"), ids, texts, grays)
        _assert_same_set(load_data_subset(path, "train", limit=5), ids[:2], texts[:2], grays[:2])
    with pytest.raises(ValueError, match=r"has no test subset \(it has: train, val\)"):
        load_hdf5_set(path, "test")
    with pytest.raises(FileNotFoundError):
        load_hdf5_set(tmp_path / "missing.h5", "train")


# ------------------------------------------------------------------------ convert, train, equivalence

@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A tiny synthetic set, its conversion by ``tfnhr convert`` and a model trained on the file."""
    root = tmp_path_factory.mktemp("hdf5")
    assert main(["synth", "--out", str(root / "synth"), "--train", "8", "--val", "4", "--test", "4",
                 "--max-chars", "12", "--quiet"]) == 0
    assert main(["convert", "--from", "synthetic", str(root / "synth"), "--out", str(root / "data.h5"),
                 "--quiet"]) == 0
    assert main(["train", "--data", str(root / "data.h5"), "--out", str(root / "run"), "--epochs", "1",
                 "--quiet", "--batch-pixels", "40000", *TINY_MODEL]) == 0
    return root


@pytest.mark.slow
def test_convert_writes_every_subset_and_reports(workspace, tmp_path, capsys):
    out = tmp_path / "again.h5"
    assert main(["convert", "--from", "iam", str(workspace / "synth"), "--out", str(out), "--subsets", "val",
                 "test", "--height", "20", "--compression", "gzip", "--quiet"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"wrote {out}: val 4, test 4 lines, ") and line.endswith(" s")
    assert "pixels" in line and "MB" in line
    with h5py.File(out, "r") as file:
        assert sorted(file) == ["test", "val"]
        assert set(file["val"]["seqLengths"][:, 0]) == {20}
        source = json.loads(file.attrs["source"])
        assert source["from"] == "iam" and source["height"] == 20 and "synthetic" not in source
    with h5py.File(workspace / "data.h5", "r") as file:
        source = json.loads(file.attrs["source"])
        assert source["from"] == "synthetic" and source["synthetic"]["counts"] == {"train": 8, "val": 4, "test": 4}


@pytest.mark.slow
def test_convert_counts_skipped_samples(workspace, tmp_path):
    folder = tmp_path / "synth"
    shutil.copytree(workspace / "synth", folder)
    images = sorted((folder / "lines").rglob("*.png"))
    broken = next(path for path in images if path.stem.startswith("s"))  # a training line
    broken.write_bytes(b"not a png")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["convert", "--from", "synthetic", str(folder), "--out", str(tmp_path / "d.h5"),
                     "--subsets", "train", "--quiet"]) == 0
    messages = [str(w.message) for w in caught]
    assert any("train data: skipped 1 of 8 samples: 1 unreadable images" in m and broken.name in m
               for m in messages), messages
    loaded = load_hdf5_set(tmp_path / "d.h5", "train")
    assert len(loaded) == 7 and broken.stem not in loaded.ids


@pytest.mark.slow
def test_convert_bad_input_exits_2_with_one_line(workspace, tmp_path, capsys):
    cases = [(["--from", "synthetic", str(tmp_path), "--out", str(tmp_path / "x.h5")], "no synthetic.json"),
             (["--from", "iam", str(tmp_path), "--out", str(tmp_path / "x.h5")], "is not an IAM folder"),
             (["--from", "iam", str(workspace / "synth"), "--out", str(tmp_path / "x.npz")], "must end in .h5")]
    for arguments, reason in cases:
        assert main(["convert", *arguments, "--quiet"]) == 2
        error = capsys.readouterr().err
        assert error.startswith("tfnhr convert: error:") and reason in error and error.count("\n") == 1
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary files


@pytest.mark.slow
def test_folder_and_hdf5_load_the_same(workspace):
    for subset in ("train", "val", "test"):
        for options in ({}, {"height": 20, "limit": 3}):
            folder = load_data_subset(workspace / "synth", subset, **options)
            _assert_same_set(load_data_subset(workspace / "data.h5", subset, **options),
                             folder.ids, folder.texts, folder.images)


@pytest.mark.slow
def test_train_and_evaluate_read_an_hdf5_file(workspace, capsys):
    summary = json.loads((workspace / "run" / "summary.json").read_text())
    assert summary["epochs_run"] == 1 and summary["train_examples"] == 8 and summary["val_examples"] == 4
    assert main(["evaluate", "--model", str(workspace / "run" / "best.keras"), "--data", str(workspace / "data.h5"),
                 "--subset", "test", "--max", "3"]) == 0
    assert f"on 3 test lines of {workspace / 'data.h5'}" in capsys.readouterr().out


# ------------------------------------------------------------------------ damaged files

def test_structural_errors_name_file_and_place(tmp_path):
    ids, texts, grays = _examples(seed=2)
    good = (ids[:4], texts[:4], grays[:4])
    cases = {
        "pixel sum": lambda g: g.__delitem__("inputs") or g.create_dataset("inputs", data=np.zeros(10, np.uint8)),
        "zero size": lambda g: g["seqLengths"].__setitem__(1, [0, 37]),
        "offsets": lambda g: g["offsets"].__setitem__(2, 5),
        "labels": lambda g: g.__delitem__("labels") or g.create_dataset("labels", data=texts[:3],
                                                                         dtype=h5py.string_dtype()),
        "missing": lambda g: g.__delitem__("seqLengths"),
    }
    expected = {"pixel sum": r"/train/inputs has 10 rows, but the 4 examples' sizes in seqLengths sum to",
                "zero size": r"/train/seqLengths: example 1 has size \[0, 37\]",
                "offsets": r"/train/offsets\[2\] = 5, but the sizes of the examples before it sum to 38",
                "labels": r"/train/labels should hold 4 strings",
                "missing": r"/train has no seqLengths dataset"}
    for name, damage in cases.items():
        path = tmp_path / f"{name.replace(' ', '_')}.h5"
        _write_raw(path, {"train": good})
        with h5py.File(path, "r+") as file:
            damage(file["train"])
        with pytest.raises(Hdf5FormatError, match=rf"^{path}: .*{expected[name]}"):
            load_hdf5_set(path, "train")
    _write_raw(tmp_path / "v2.h5", {"train": good}, version=2)
    with pytest.raises(Hdf5FormatError, match="not a tfnhr-text-images file of version <= 1"):
        load_hdf5_set(tmp_path / "v2.h5", "train")


@pytest.mark.slow
def test_truncated_files_fail_naming_file_and_size(workspace, tmp_path):
    data = (workspace / "data.h5").read_bytes()
    path = tmp_path / "cut.h5"
    for cut in (0, 7, 100, 2000, len(data) // 3, len(data) // 2, len(data) - 1000, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(Hdf5FormatError, match=rf"^{path}: not a readable HDF5 file .*\b{cut} bytes\)"):
            load_data_subset(path, "train")
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(Hdf5FormatError, match=rf"eof = {len(data) // 2}\b.*stored_eof = {len(data)}\b"):
        load_data_subset(path, "val")


@pytest.mark.slow
def test_flipped_bytes_never_load_silently(workspace, tmp_path):
    """Targeted: a flip in the pixels names the chunk's byte offset and its examples, a flip in a
    transcription fails its checksum. Then a sweep over the whole file: every flip either fails
    with Hdf5FormatError or leaves every subset exactly as it was (unused bytes)."""
    source = workspace / "data.h5"
    data = source.read_bytes()
    originals = {subset: load_hdf5_set(source, subset) for subset in ("train", "val", "test")}
    path = tmp_path / "flipped.h5"

    def flipped(offset: int) -> None:
        damaged = bytearray(data)
        damaged[offset] ^= 0x24
        path.write_bytes(damaged)

    with h5py.File(source, "r") as file:
        chunk = file["val"]["inputs"].id.get_chunk_info(0)
    flipped(chunk.byte_offset + 100)
    with pytest.raises(Hdf5FormatError, match=rf"^{path}: /val/inputs: chunk of rows 0\.\.\d+ "
                                              rf"\(examples 0\.\.3\) at byte offset {chunk.byte_offset} "):
        load_hdf5_set(path, "val")
    text = originals["test"].texts[1].encode()
    flipped(data.index(text) + len(text) // 2)
    with pytest.raises(Hdf5FormatError, match=rf"^{path}: /test/labels: the strings' CRC-32 is"):
        load_hdf5_set(path, "test")

    failures = 0
    ends = [*range(0, 3000, 61), *range(len(data) - 3000, len(data), 61)]  # metadata lives at both ends
    for offset in [*ends, *np.linspace(0, len(data) - 1, 50, dtype=int)]:
        flipped(offset)
        for subset, original in originals.items():
            try:
                loaded = load_hdf5_set(path, subset)
            except Hdf5FormatError as error:
                assert str(error).startswith(f"{path}: "), error
                failures += 1
            else:
                _assert_same_set(loaded, original.ids, original.texts, original.images)
    assert failures > 0


# ------------------------------------------------------------------------ dump

@pytest.mark.slow
def test_dump_writes_layer_outputs_equal_to_direct_computation(workspace, capsys):
    model_path, out = workspace / "run" / "best.keras", workspace / "acts.h5"
    assert main(["dump", "--model", str(model_path), "--layer", "output", "--layer", "mdlstm1",
                 "--data", str(workspace / "data.h5"), "--subset", "val", "--out", str(out), "--quiet"]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out}: 4 val examples; output ")
    model = load_recognizer(model_path)
    data = load_hdf5_set(workspace / "data.h5", "val")
    with h5py.File(out, "r") as file:
        assert file.attrs["format"] == "tfnhr-activations"
        assert json.loads(file.attrs["layers"]) == ["output", "mdlstm1"]
        assert file["seqTags"].asstr()[()].tolist() == data.ids
        assert file["labels"].asstr()[()].tolist() == data.texts
        layers = {name: (file["layers"][name]["outputs"][()], file["layers"][name]["seqLengths"][()],
                         file["layers"][name]["offsets"][()]) for name in ("output", "mdlstm1")}
    for index, gray in enumerate(data.images[:2]):
        scores = Transcriber(model).scores([gray])[0]
        values, sizes, offsets = layers["output"]
        assert values.dtype == np.float32 and sizes[index].tolist() == [len(scores)]
        np.testing.assert_allclose(values[offsets[index]:offsets[index + 1]], scores, rtol=1e-5, atol=1e-5)

        ink = ragged_stack([to_ink(scale_to_height(gray, model.input_height))])
        mdlstm1 = model.get_layer("mdlstm1")(ink, training=False)[0].to_tensor().numpy()
        values, sizes, offsets = layers["mdlstm1"]
        assert sizes[index].tolist() == list(mdlstm1.shape[:2])
        np.testing.assert_allclose(values[offsets[index]:offsets[index + 1]].reshape(mdlstm1.shape), mdlstm1,
                                   rtol=1e-5, atol=1e-5)
    ids, texts, outputs = load_activations(out, "mdlstm1")
    assert ids == data.ids and texts == data.texts
    values, sizes, offsets = layers["mdlstm1"]
    for output, size, start, stop in zip(outputs, sizes, offsets, offsets[1:]):
        assert output.shape == (*size, values.shape[1])
        np.testing.assert_array_equal(output.reshape(-1, values.shape[1]), values[start:stop])
    with pytest.raises(ValueError, match="holds no 'scores' outputs"):
        load_activations(out, "scores")


@pytest.mark.slow
def test_dump_unknown_layer_exits_2_and_writes_nothing(workspace, tmp_path, capsys):
    out = tmp_path / "acts.h5"
    assert main(["dump", "--model", str(workspace / "run" / "best.keras"), "--layer", "nope",
                 "--data", str(workspace / "data.h5"), "--out", str(out), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("tfnhr dump: error: unknown layer") and "mdlstm1" in error
    assert list(tmp_path.iterdir()) == []
