"""The recognizer end to end: CTC training memorises lines, and the ``tfnhr`` commands
(synth -> train -> resume -> lm build -> evaluate -> recognize) run on a tiny set in a temp dir."""

from __future__ import annotations

import csv
import json
import subprocess

import keras
import numpy as np
import pytest
from PIL import Image

from tfnhr.charset import Charset
from tfnhr.config.choices import ENSEMBLE_SHEARS, ENSEMBLE_WIDTHS
from tfnhr.config.options import OptionError
from tfnhr.config.train_options import TrainOptions
from tfnhr.cli import main
from tfnhr.data.synthetic import handwriting
from tfnhr.data.images import load_gray
from tfnhr.data.samples import TextImageSet
from tfnhr.data.sources import load_data_subset
from tfnhr.data.dataset import make_dataset
from tfnhr.decoding import greedy_decode_batch
from tfnhr.recognition.transcriber import Transcriber
from tfnhr.training import train as train_recognizer
from tfnhr.evaluation.metrics import error_rate
from tfnhr.models import build_recognizer
from tests.helpers.environment import VENV_BIN
from tests.helpers.tiny_models import TINY_MODEL


@pytest.mark.slow
def test_ctc_training_memorises_lines():
    """A tiny recognizer fitted on three rendered words drives the CTC loss down and reads all
    three back exactly with greedy decoding."""
    keras.utils.set_random_seed(1)
    texts = ["cab", "bad", "dace"]
    font = handwriting.font_paths("train")[0]
    images = [np.asarray(Image.fromarray(handwriting.render(text, font, np.random.default_rng(i)))
                         .resize((16 * len(text), 24))) for i, text in enumerate(texts)]
    data = TextImageSet(images, texts, texts)
    charset = Charset.from_texts(texts)
    model = build_recognizer(charset, mdlstm_units=(2, 8, 24), conv_filters=(6, 12), block=(2, 2), dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(0.01, global_clipnorm=10))
    history = model.fit(make_dataset(data, charset, batch_pixels=10_000).repeat(30), epochs=5, verbose=0,
                        shuffle=False)
    losses = history.history["loss"]
    assert losses[-1] < 0.1 * losses[0], losses
    assert greedy_decode_batch(Transcriber(model).scores(images), charset) == texts


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A tiny synthetic set, a model trained on it for one epoch, and an LM of its texts."""
    root = tmp_path_factory.mktemp("cli")
    data, run = root / "synth", root / "run"
    assert main(["synth", "--out", str(data), "--train", "24", "--val", "6", "--test", "6",
                 "--max-chars", "16", "--quiet"]) == 0
    assert main(["train", "--data", str(data), "--out", str(run), "--epochs", "1", "--quiet",
                 "--batch-pixels", "40000", *TINY_MODEL]) == 0
    corpus = root / "corpus.txt"
    corpus.write_text(handwriting.corpus_text("train")[:20_000])
    assert main(["lm", "build", "--text", str(corpus), "--order", "2", "--out", str(root / "lm.arpa")]) == 0
    return root


@pytest.mark.slow
def test_train_writes_models_logs_and_summary(workspace):
    run = workspace / "run"
    for name in ("best.keras", "last.keras", "state.json", "charset.json", "log.csv", "summary.json"):
        assert (run / name).is_file(), name
    assert list((run / "tensorboard").rglob("events.out.tfevents.*"))
    rows = list(csv.DictReader(open(run / "log.csv")))
    assert [row["epoch"] for row in rows] == ["1"]  # counted from 1, as on screen and in summary.json
    assert {"loss", "val_cer", "val_wer", "learning_rate"} <= set(rows[0])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["epochs_run"] == 1 and summary["best_epoch"] == 1
    assert summary["stop_reason"] == "epochs: all 1 epochs run" and summary["model"] == str(run / "best.keras")
    assert summary["best_val_cer"] == pytest.approx(float(rows[0]["val_cer"]))
    model = keras.models.load_model(run / "best.keras")
    assert model.input_height == 24 and model.mdlstm_units == (2, 6, 16)
    assert model.charset == Charset.load(run / "charset.json")
    assert not [p for p in run.iterdir() if ".tmp" in p.name]


@pytest.mark.slow
def test_resume_continues_from_the_saved_epoch(workspace, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("best.keras", "last.keras", "state.json", "log.csv"):
        (run / name).write_bytes((workspace / "run" / name).read_bytes())
    iterations = int(keras.models.load_model(run / "last.keras").optimizer.iterations.numpy())
    assert iterations > 0
    assert main(["train", "--data", str(workspace / "synth"), "--out", str(run), "--epochs", "2",
                 "--resume", "--quiet", "--batch-pixels", "40000", *TINY_MODEL]) == 0
    assert [row["epoch"] for row in csv.DictReader(open(run / "log.csv"))] == ["1", "2"]
    assert json.loads((run / "state.json").read_text())["epoch"] == 2
    resumed = keras.models.load_model(run / "last.keras")
    if json.loads((run / "state.json").read_text())["halving"]["halvings"] == [2]:
        assert float(resumed.optimizer.learning_rate.numpy()) == pytest.approx(0.0025)  # reset at epoch 2
    else:
        assert int(resumed.optimizer.iterations.numpy()) > iterations  # the optimizer state came along


@pytest.mark.slow
def test_evaluate_prints_greedy_and_lm_rows(workspace, capsys):
    out = workspace / "eval.json"
    assert main(["evaluate", "--model", str(workspace / "run" / "best.keras"), "--data", str(workspace / "synth"),
                 "--subset", "val", "--lm", str(workspace / "lm.arpa"), "--beam-width", "4",
                 "--json", str(out), "--show", "2"]) == 0
    printed = capsys.readouterr().out
    assert "greedy" in printed and "beam+lm" in printed and "reference:" in printed
    rows = json.loads(out.read_text())
    assert [row["decoder"] for row in rows] == ["greedy", "beam+lm"]
    assert all(0 <= row["cer"] and 0 <= row["wer"] for row in rows)
    readings = []
    for processes in ("1", "2"):  # the beam searches in this process and in 2 workers: the same readings
        assert main(["evaluate", "--model", str(workspace / "run" / "best.keras"), "--data", str(workspace / "synth"),
                     "--subset", "val", "--lm", str(workspace / "lm.arpa"), "--beam-width", "4", "--decoders",
                     "beam+lm", "--show", "1000", "--decoding-processes", processes]) == 0
        readings.append([line for line in capsys.readouterr().out.splitlines() if "beam+lm:" in line])
    assert len(readings[0]) >= 4 and readings[0] == readings[1]


@pytest.mark.slow
def test_evaluate_and_recognize_with_a_width_and_shear_ensemble(workspace, tmp_path, capsys):
    model_path, out = workspace / "run" / "best.keras", tmp_path / "eval.json"
    assert main(["evaluate", "--model", str(model_path), "--data", str(workspace / "synth"), "--subset", "val",
                 "--widths", "0.9,1,1.2", "--json", str(out)]) == 0
    model = keras.models.load_model(model_path)
    data = load_data_subset(workspace / "synth", "val")
    expected = Transcriber(model, widths=(0.9, 1.0, 1.2)).transcribe(data.images)
    assert json.loads(out.read_text())[0]["cer"] == pytest.approx(error_rate(data.texts, expected))
    image = next((workspace / "synth" / "lines").rglob("*.png"))
    capsys.readouterr()
    assert main(["recognize", "--model", str(model_path), str(image), "--widths", "default", "--format", "text"]) == 0
    assert capsys.readouterr().out == Transcriber(model, widths=ENSEMBLE_WIDTHS).transcribe([load_gray(image)])[0] + "\n"
    assert main(["recognize", "--model", str(model_path), str(image), "--widths", "1,1.2", "--shears", "default",
                 "--format", "json"]) == 0
    [result] = json.loads(capsys.readouterr().out)
    views = Transcriber(model, widths=(1.0, 1.2), shears=ENSEMBLE_SHEARS)
    assert result["text"] == views.transcribe([load_gray(image)])[0]
    assert all(0 <= span["x0"] <= span["x1"] <= load_gray(image).shape[1] for span in result.get("chars", []))


@pytest.mark.subprocess
@pytest.mark.slow
def test_recognize_prints_text_and_reports_unreadable_files(workspace, tmp_path, capsys):
    model_path = workspace / "run" / "best.keras"
    image = next((workspace / "synth" / "lines").rglob("*.png"))
    garbage = tmp_path / "garbage.png"
    garbage.write_bytes(b"not an image")
    assert main(["recognize", "--model", str(model_path), str(image), str(garbage)]) == 1
    captured = capsys.readouterr()
    assert "garbage.png: not a readable image" in captured.err
    path, text, confidence = captured.out.strip().split("\t")
    assert path == str(image) and 0 < float(confidence) <= 1
    model = keras.models.load_model(model_path)
    assert text == greedy_decode_batch(Transcriber(model).scores([load_gray(image)]), model.charset)[0]
    # The console script in a fresh process (where nothing imported tfnhr.model beforehand).
    fresh = subprocess.run([str(VENV_BIN / "tfnhr"), "recognize", "--model", str(model_path), str(image)],
                           capture_output=True, text=True, timeout=300)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    assert fresh.stdout.split("\t")[:2] == [str(image), text]


@pytest.mark.slow
def test_recognize_formats_output_file_and_images_too_small_to_read(workspace, tmp_path, capsys):
    model_path = workspace / "run" / "best.keras"
    image = next((workspace / "synth" / "lines").rglob("*.png"))
    tiny, garbage = tmp_path / "tiny.png", tmp_path / "garbage.png"
    Image.fromarray(np.zeros((1, 1), np.uint8)).save(tiny)
    garbage.write_bytes(b"not an image")
    assert main(["recognize", "--model", str(model_path), str(image), "--format", "text"]) == 0
    text = capsys.readouterr().out.rstrip("\n")
    assert main(["recognize", "--model", str(model_path), str(image), str(tiny), str(garbage),
                 "--format", "json", "--out", str(tmp_path / "out.json"), "--batch-pixels", "5000"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert err[0] == f"tfnhr recognize: warning: {tiny}: too small to read: 1x1 px (width x height; at least 4x8 px)"
    assert err[1].startswith(f"tfnhr recognize: error: {garbage}: not a readable image")
    results = json.loads((tmp_path / "out.json").read_text())
    assert [set(r) for r in results] == [{"path", "text", "confidence", "words", "chars"},
                                         {"path", "text", "confidence", "warning"}, {"path", "error"}]
    assert results[0]["text"] == text and 0 < results[0]["confidence"] <= 1
    words = results[0]["words"]  # greedy decoding: the best path's words with their pixel columns
    assert [word["text"] for word in words] == text.split()
    width = load_gray(image).shape[1]
    assert all(0 <= w["x0"] < w["x1"] <= width and 0 < w["confidence"] <= 1 for w in words)
    assert all(a["x1"] <= b["x0"] for a, b in zip(words, words[1:]))
    chars = results[0]["chars"]  # every character of the text, spaces included, left to right
    assert "".join(char["text"] for char in chars) == text
    assert all(0 <= c["x0"] < c["x1"] <= width and 0 < c["confidence"] <= 1 for c in chars)
    assert all(a["x1"] <= b["x0"] for a, b in zip(chars, chars[1:]))
    assert (results[1]["text"], results[1]["confidence"]) == ("", 0.0) and "too small" in results[1]["warning"]
    assert main(["recognize", "--model", str(model_path), str(image), str(garbage), "--format", "jsonl"]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [results[0], results[2]]
    assert main(["recognize", "--model", str(model_path), str(image), "--device", "cpu"]) == 0
    assert capsys.readouterr().out == f"{image}\t{text}\t{results[0]['confidence']:.3f}\n"


@pytest.mark.slow
def test_the_default_batch_holds_a_dozen_median_lines(workspace, tmp_path):
    """Without --batch-pixels the budget is 12 median training lines (after scaling), at least two
    of the largest, recorded in summary.json."""
    run = tmp_path / "run"
    assert main(["train", "--data", str(workspace / "synth"), "--out", str(run), "--epochs", "1", "--quiet",
                 "--max-train", "8", "--max-val", "3", *TINY_MODEL]) == 0
    ids = (workspace / "synth" / "largeWriterIndependentTextLineRecognitionTask" / "trainset.txt").read_text().split()
    sizes = [Image.open(next((workspace / "synth" / "lines").rglob(f"{line_id}.png"))).size for line_id in ids[:8]]
    pixels = sorted(24 * max(1, round(width * 24 / height)) for width, height in sizes)  # TINY_MODEL: --height 24
    expected = int(max(12 * (pixels[3] + pixels[4]) / 2, 2 * pixels[-1]))
    assert json.loads((run / "summary.json").read_text())["batch_pixels"] == expected


@pytest.mark.slow
def test_a_run_folder_is_refused_without_resume_or_overwrite(workspace, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("best.keras", "log.csv", "summary.json"):
        (run / name).write_bytes((workspace / "run" / name).read_bytes())
    before = (run / "best.keras").read_bytes()
    train = ["train", "--data", str(workspace / "synth"), "--out", str(run), "--epochs", "1", "--quiet",
             "--batch-pixels", "40000", "--max-train", "8", "--max-val", "3", *TINY_MODEL]
    assert main(train) == 2
    err = capsys.readouterr().err
    assert err == (f"tfnhr train: error: {run} already holds a training run (best.keras, log.csv, summary.json): "
                   "continue it with --resume, replace it with --overwrite, or choose another --out\n")
    assert (run / "best.keras").read_bytes() == before
    assert main([*train, "--overwrite"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["train_examples"] == 8 and summary["stop_reason"] == "epochs: all 1 epochs run"
    assert [row["epoch"] for row in csv.DictReader(open(run / "log.csv"))] == ["1"]  # the old rows are gone


@pytest.mark.slow
def test_a_failed_start_leaves_nothing_and_its_corrected_rerun_runs(workspace, tmp_path, capsys):
    """Invalid data and data too narrow for the model write nothing; the corrected command then runs
    without --overwrite, also over what a start that failed later (in training) left behind; the
    Python API's refusal names its own settings."""
    run = tmp_path / "run"
    train = ["train", "--data", str(workspace / "synth"), "--out", str(run), "--epochs", "1", "--quiet",
             "--batch-pixels", "40000", "--max-train", "8", "--max-val", "3", *TINY_MODEL]
    assert main([*train[:2], str(tmp_path / "missing"), *train[3:]]) == 2
    with pytest.warns(UserWarning, match="dropped 8 of 8 examples too narrow"):
        assert main([*train, "--block", "8x8"]) == 2  # 64 input columns per output column: every line too narrow
    assert "every example is too narrow" in capsys.readouterr().err
    assert not run.exists()
    run.mkdir()
    (run / "charset.json").write_text("{}")  # what a run that failed in its first epoch leaves
    (run / "tensorboard").mkdir()
    (run / "tensorboard" / "events.stale").write_text("")
    assert main(train) == 0, capsys.readouterr().err
    assert not (run / "tensorboard" / "events.stale").exists()
    assert json.loads((run / "summary.json").read_text())["train_examples"] == 8
    options = TrainOptions(data=str(workspace / "synth"), out=str(run), epochs=1, verbose=0)
    with pytest.raises(OptionError, match="continue it with resume=True, replace it with overwrite=True, "
                                          "or choose another out folder$"):
        train_recognizer(options)


@pytest.mark.slow
def test_model_files_that_are_not_models_are_named_as_such(workspace, tmp_path, capsys):
    (tmp_path / "random.keras").write_bytes(np.random.default_rng(0).bytes(1000))
    for model, message in [(workspace / "run", f"{workspace / 'run'} is a folder, not a model file: did you mean "
                                                f"{workspace / 'run' / 'best.keras'}?"),
                           (tmp_path, f"{tmp_path} is a folder, not a model file: pass a .keras file"),
                           (tmp_path / "random.keras", "is not a Keras model file (a .keras file is a zip archive")]:
        assert main(["recognize", "--model", str(model), str(tmp_path / "x.png")]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


def test_device_gpu_without_a_gpu_is_a_one_line_error(tmp_path, capsys):
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU")
    assert main(["recognize", "--model", str(tmp_path / "m.keras"), str(tmp_path / "x.png"), "--device", "gpu"]) == 2
    assert "--device gpu: TensorFlow sees no GPU" in capsys.readouterr().err


def test_bad_inputs_give_one_line_errors(tmp_path, capsys):
    assert main(["train", "--data", str(tmp_path), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    assert "tfnhr train: error:" in capsys.readouterr().err
    assert main(["recognize", "--model", str(tmp_path / "missing.keras"), str(tmp_path / "x.png")]) == 2
    assert "tfnhr recognize: error:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--data", str(tmp_path), "--block", "2by4"])
