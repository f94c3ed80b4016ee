"""The main job (``make demo`` = ``python -m tfnhr.commands.main_job``) end to end on a tiny set, as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tfnhr.data.synthetic import handwriting
from tfnhr.models import load_recognizer


@pytest.mark.subprocess
@pytest.mark.slow
def test_main_job_trains_and_reports_greedy_and_lm_error_rates(tmp_path):
    out = tmp_path / "main"
    result = subprocess.run(
        [sys.executable, "-m", "tfnhr.commands.main_job", "--out", str(out), "--train", "16", "--val", "4",
         "--test", "4", "--time-limit", "0"],
        capture_output=True, text=True, timeout=600,
        env={key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    # TensorFlow's start-up lines and KenLM's advice stay out of the output without any setting
    for noise in ("oneDNN custom operations", "cpu_feature_guard", "build a binary file"):
        assert noise not in result.stdout + result.stderr, noise
    for step in ("[1/4]", "[2/4]", "[3/4]", "[4/4]", "model saved at", "  ref:  ", "  read: "):
        assert step in result.stdout
    assert "on lines scaled to 36 px" in result.stdout
    assert f"16 train (fonts: core, {len(handwriting.FONT_SPLITS['train'])})" in result.stdout
    for picture in (out / "samples.png", out / "model" / "curves.png"):
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 5000
    report = json.loads((out / "main.json").read_text())
    assert (report["model"], report["train_fonts"]) == ("small-stem", "core")
    assert report["training"]["epochs_run"] == 1 and report["training"]["stopped_by_time_limit"]
    assert report["training"]["train_examples"] + report["training"]["val_examples"] <= 20
    for subset in ("val", "test"):
        assert [row["decoder"] for row in report[subset]] == ["greedy", "beam+lm", "greedy, 8 widths x 3 shears",
                                                              "beam+lm, 8 widths x 3 shears"]
        assert all(row["cer"] >= 0 and row["wer"] >= 0 for row in report[subset])
    assert report["val"][0]["cer"] == report["training"]["best_val_cer"]  # the same model, data, decoder
    fonts = dict(line.split("\t") for line in (out / "synth" / "fonts.tsv").read_text().splitlines())
    texts = {row.split(" ")[0]: " ".join(row.split(" ")[8:]).replace("|", " ")
             for row in (out / "synth" / "ascii" / "lines.txt").read_text().splitlines() if not row.startswith("#")}
    for subset, prefix, held_out in (("val", "v", {"Breip.ttf", "Kristi.ttf"}), ("test", "t", {"Rufscript010.ttf", "Purisa.otf"})):
        chars = {}
        for line_id, text in texts.items():
            if line_id.startswith(prefix):
                chars[fonts[line_id]] = chars.get(fonts[line_id], 0) + len(text)
        for row in report[subset]:
            assert set(row["cer_by_font"]) == set(chars) and set(chars) <= held_out
            combined = sum(row["cer_by_font"][font] * n for font, n in chars.items()) / sum(chars.values())
            assert combined == pytest.approx(row["cer"], abs=1e-9)
    assert "greedy CER by font: " in result.stdout
    model = load_recognizer(out / "model" / "best.keras")
    assert (model.stem_filters, model.mdlstm_units, model.conv_filters, model.input_height) == (
        (8, 16), (10, 50), (12, 20), 36)  # small-stem, 36-px lines
    assert "\\data\\" in (out / "lm.arpa").read_text()[:200]


@pytest.mark.parametrize(("batch_pixels", "workers", "expected"), [(190_000, 2, 50), (190_000, 1, 100), (60_000, 2, 183),
                                                                   (16_500, 1, 1100), (10**7, 8, 1)])
def test_validation_interval_passes_about_the_asked_lines_between_validations(batch_pixels, workers, expected):
    from tfnhr.config.choices import MAIN_JOB_PIXELS_PER_LINE
    from tfnhr.commands.main_job import validation_interval

    assert validation_interval(1100, batch_pixels, workers) == expected
    lines_per_update = batch_pixels // MAIN_JOB_PIXELS_PER_LINE * workers
    assert expected == max(1, 1100 // lines_per_update)


def test_batch_pixels_below_one_line_is_refused_in_one_line(capsys):
    from tfnhr.commands.main_job import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--batch-pixels", "5000"])
    assert "--batch-pixels must hold at least one line (16500), got 5000" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "model", "train_fonts", "anneal"), [
    ([], "small-stem", "core", 0.7), (["--preset", "full"], "stem-80", "all", 0.5),
    (["--preset", "full", "--model", "small-stem", "--anneal", "0.7"], "small-stem", "all", 0.7),
    (["--train-fonts", "all", "--model", "stem-80", "--anneal", "none"], "stem-80", "all", None)])
def test_each_preset_picks_its_recognizer_fonts_and_annealing_unless_told(argv, model, train_fonts, anneal):
    from tfnhr.commands.main_job import parse_args, training_options

    args = parse_args(argv)
    assert (args.model, args.train_fonts, args.anneal) == (model, train_fonts, anneal)
    assert training_options(args, args.out / "synth", 80, 14.0, 1100).anneal == anneal


def test_an_annealing_start_outside_0_to_1_is_refused_in_one_line(capsys):
    from tfnhr.commands.main_job import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--anneal", "1"])
    assert "--anneal" in capsys.readouterr().err


def test_the_help_names_each_presets_values(capsys):
    from tfnhr.commands.main_job import build_parser

    build_parser().print_help()
    help_text = " ".join(capsys.readouterr().out.split())
    for values in ("full stem-80, quick small-stem", "full all, quick core", "full 49, quick 15",
                   "full 0.5, quick 0.7"):
        assert f"the preset's, {values}" in help_text


@pytest.mark.parametrize("argv", [[], ["--preset", "full", "--workers", "2"], ["--anneal", "none"],
                                  ["--model", "large", "--augment", "strong", "--batch-pixels", "60000",
                                   "--workers", "2", "--seed", "3", "--dropout", "0.25", "--normalize-spacing",
                                   "--confidence-penalty", "0.1"]])
def test_the_workers_train_with_the_options_of_the_main_job(argv, tmp_path):
    """The flags handed to Horovod workers, read back by ``tfnhr train``'s parser, are exactly the
    options that the main job trains with in this process."""
    import argparse

    from tfnhr.commands.main_job import parse_args, training_options
    from tfnhr.commands.train import register
    from tfnhr.config.options import option_flags
    from tfnhr.training import options_from_args

    options = training_options(parse_args([*argv, "--out", str(tmp_path)]), tmp_path / "synth", 80, 14.0, 1100)
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    assert options_from_args(parser.parse_args(["train", *option_flags(options)])) == options
