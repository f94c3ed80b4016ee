"""Pages through the command lines: ``tfnhr synth --layout`` writes an export-style folder,
``tfnhr train --data`` trains on it (and Horovod's ``train.py --task nhr``), ``evaluate`` and
``convert`` read it, and ``tfnhr recognize --pages`` writes the recognized text back."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tfnhr.cli import main
from tfnhr.data.pages.layout import read_layout
from tfnhr.data.pages.reading import Skips, find_layout_files
from tests.helpers.environment import REPO, VENV_BIN
from tests.helpers.page_fixtures import without_line_text
from tests.helpers.tiny_models import TINY_MODEL, tiny_recognizer


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """ALTO pages: train 4, val 1, test 1."""
    folder = tmp_path_factory.mktemp("pages") / "alto"
    assert main(["synth", "--layout", "alto", "--out", str(folder), "--train", "4", "--val", "1", "--test", "1",
                 "--quiet"]) == 0
    return folder


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "tiny.keras"
    tiny_recognizer().save(path)
    return path


def test_synth_writes_an_export_style_folder(pages, capsys):
    assert sorted(path.relative_to(pages).as_posix() for path in pages.rglob("*.xml")) == [
        "test/alto/t0000.xml", "test/mets.xml", "train/alto/s0000.xml", "train/alto/s0001.xml",
        "train/alto/s0002.xml", "train/alto/s0003.xml", "train/mets.xml", "valid/alto/v0000.xml", "valid/mets.xml"]
    assert (pages / "train" / "s0000.png").is_file()
    assert main(["synth", "--layout", "page", "--kind", "words", "--out", str(pages.parent / "x")]) == 2
    assert "a page --layout writes lines of the default lengths" in capsys.readouterr().err


@pytest.mark.slow
def test_recognize_pages_writes_every_file_back(pages, tiny_model, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["recognize", "--pages", str(pages), "--out", str(out), "--model", str(tiny_model)]) == 0
    summary = json.loads(capsys.readouterr().out)
    sources = find_layout_files(pages, Skips())
    assert summary["pages"] == len(sources) == 6 and summary["lines"] > 0 and summary["lines_per_second"] > 0
    for source in sources:
        written, original = read_layout(out / source.relative_to(pages)), read_layout(source)
        assert all(line.element.xpath("a:String/@WC", namespaces={"a": written.namespace}) for line in written.lines)
        assert without_line_text(written.tree, "alto") == without_line_text(original.tree, "alto")
    one = sources[0]
    assert main(["recognize", "--pages", str(one), "--out", str(tmp_path / "one"), "--model", str(tiny_model)]) == 0
    assert (tmp_path / "one" / one.name).read_bytes() == (out / one.relative_to(pages)).read_bytes()


@pytest.mark.slow
def test_recognize_pages_exits_1_when_a_page_was_skipped(pages, tiny_model, tmp_path, capsys):
    """A page whose image is missing is counted in a warning and makes the exit status 1; the
    others are still written."""
    folder = tmp_path / "pages"
    shutil.copytree(pages / "train", folder)
    (folder / "s0001.png").unlink()
    out = tmp_path / "out"
    with pytest.warns(UserWarning, match=r"--pages: skipped 1 pages whose image is missing"):
        assert main(["recognize", "--pages", str(folder), "--out", str(out), "--model", str(tiny_model)]) == 1
    assert json.loads(capsys.readouterr().out)["pages"] == 3
    assert sorted(path.name for path in (out / "alto").iterdir()) == ["s0000.xml", "s0002.xml", "s0003.xml"]


@pytest.mark.parametrize("arguments, message", [
    (["IMAGE", "--pages", "PAGES", "--out", "OUT"], "give IMAGEs or --pages, not both"),
    (["--pages", "PAGES"], "--pages needs --out FOLDER"),
    ([], "no input: give IMAGE files or --pages DIR_OR_FILE"),
    (["--pages", "PAGES/train", "PAGES/test", "--out", "OUT"], "is a folder: give one folder, or layout files"),
    (["--pages", "PAGES/train/mets.xml", "--out", "OUT"], "mets.xml: neither PAGE-XML"),
])
def test_recognize_pages_argument_errors(pages, tiny_model, tmp_path, capsys, arguments, message):
    arguments = [a.replace("PAGES", str(pages)).replace("OUT", str(tmp_path / "out"))
                 .replace("IMAGE", str(pages / "train" / "s0000.png")) for a in arguments]
    assert main(["recognize", *arguments, "--model", str(tiny_model)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("tfnhr recognize: error: ") and message in error and error.count("\n") == 1


def test_convert_reads_a_pages_folder(pages, tmp_path, capsys):
    assert main(["convert", "--from", "iam", str(pages), "--out", str(tmp_path / "pages.h5"), "--quiet"]) == 0
    assert "lines from pages" in capsys.readouterr().out


@pytest.mark.slow
def test_train_evaluate_and_recognize_on_pages(pages, tmp_path, capsys):
    """``tfnhr train --data`` on the pages folder (found as pages without --kind), evaluate on
    its test pages, and fill the test page with the trained model."""
    run = tmp_path / "run"
    assert main(["train", "--data", str(pages), "--out", str(run), "--epochs", "1", "--quiet", *TINY_MODEL]) == 0
    summary = json.loads((run / "summary.json").read_text())
    # lines too narrow for the tiny model's 4x width reduction are dropped and counted
    written = sum(len(read_layout(p).lines) for p in (pages / "train").rglob("s*.xml"))
    assert summary["train_examples"] + summary["train_dropped_too_narrow"] == written
    assert summary["val_examples"] == len(read_layout(pages / "valid" / "alto" / "v0000.xml").lines)
    capsys.readouterr()
    assert main(["evaluate", "--data", str(pages), "--kind", "pages", "--subset", "test",
                 "--model", str(run / "best.keras")]) == 0
    assert "test lines of" in capsys.readouterr().out
    assert main(["recognize", "--pages", str(pages / "test" / "alto" / "t0000.xml"), "--out", str(tmp_path / "out"),
                 "--model", str(run / "best.keras")]) == 0
    assert json.loads(capsys.readouterr().out)["pages"] == 1


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_horovod_job_trains_on_pages(pages, tmp_path):
    """``train.py --task nhr`` as one plain process (a world of one) on the pages folder."""
    out = tmp_path / "hvd"
    finished = subprocess.run([str(VENV_BIN / "python"), str(REPO / "train.py"), "--task", "nhr", "--data", str(pages),
                               "--out", str(out), "--epochs", "1", *TINY_MODEL],
                              capture_output=True, text=True, timeout=600, cwd=REPO)
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert json.loads((out / "summary.json").read_text())["train_examples"] > 0
