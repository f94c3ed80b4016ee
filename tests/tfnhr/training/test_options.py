"""``tfnhr.training.options``: defaults < a config file's training parameters < options given,
the one resolution that ``tfnhr train`` and ``train.py --task nhr`` share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfnhr.commands.train import register
from tfnhr.network import load_config
from tfnhr.training import TrainOptions, options_from_args, resolve_options

RUN = {"data": Path("data"), "out": Path("runs/x")}


def test_defaults_then_config_then_given(tmp_path):
    config_file = tmp_path / "net.yaml"
    config_file.write_text("network:\n  out: {class: ctc}\nlearning_rate: 0.001\nschedule: constant\nepochs: 7\n")
    config = load_config(config_file)
    plain = resolve_options(RUN, None, {})
    assert plain == TrainOptions(**RUN)
    from_file = resolve_options(RUN, config, {})
    assert (from_file.learning_rate, from_file.halve_on, from_file.epochs) == (0.001, "never", 7)
    assert from_file.network == config.network and from_file.network_source == str(config_file)
    given = resolve_options(RUN, config, {"epochs": 3, "halve_on": "cer"})
    assert (given.learning_rate, given.halve_on, given.epochs) == (0.001, "cer", 3)


def test_model_fields_and_a_config_exclude_each_other(tmp_path):
    config_file = tmp_path / "net.json"
    config_file.write_text('{"network": {"out": {"class": "ctc"}}}')
    config = load_config(config_file)
    with pytest.raises(ValueError, match="mdlstm_units cannot be combined"):
        resolve_options(RUN, config, {"mdlstm_units": (2, 4, 8)})
    with pytest.raises(ValueError, match="--units cannot be combined"):
        resolve_options(RUN, config, {"mdlstm_units": (2, 4, 8)}, names={"mdlstm_units": "--units"})


def test_flags_override_a_shipped_config():
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["train", "--data", "d", "--config", "small", "--lr", "0.01", "--halve-on", "never"])
    options = options_from_args(args)
    assert (options.learning_rate, options.halve_on) == (0.01, "never")
    assert options.network == load_config("small").network
    preset = options_from_args(parser.parse_args(["train", "--data", "d", "--block", "2x2", "--units", "2,4,8"]))
    assert (preset.block, preset.mdlstm_units, preset.network) == (((2, 2), (2, 2)), (2, 4, 8), None)
    with pytest.raises(ValueError, match="--block cannot be combined"):
        options_from_args(parser.parse_args(["train", "--data", "d", "--config", "small", "--block", "2x2"]))


def test_recipe_and_augmentation_options_from_flags_and_config(tmp_path):
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    defaults = options_from_args(parser.parse_args(["train", "--data", "d"]))
    assert (defaults.augment, defaults.validate_every, defaults.halve_start, defaults.halve_patience,
            defaults.halve_margin, defaults.ema, defaults.confidence_penalty) == ("default", None, 0.5, 2, 1.0, 0.99, 0.1)
    given = options_from_args(parser.parse_args(
        ["train", "--data", "d", "--augment", "none", "--validate-every", "50", "--halve-start", "none",
         "--halve-patience", "1", "--halve-margin", "0", "--anneal", "none", "--sort-window", "1", "--ema", "none",
         "--confidence-penalty", "0.2"]))
    assert (given.augment, given.validate_every, given.halve_start, given.halve_patience, given.halve_margin,
            given.anneal, given.sort_window, given.ema, given.confidence_penalty) == \
        ("none", 50, None, 1, 0.0, None, 1, None, 0.2)
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--data", "d", "--halve-start", "1.5"])

    config_file = tmp_path / "net.yaml"
    config_file.write_text("network:\n  out: {class: ctc}\naugment: strong\nvalidate_every: 30\n"
                           "halve_start: 0.25\nhalve_patience: 3\nhalve_margin: 2\nanneal: 0.8\nsort_window: 4\n"
                           "ema: 0.9\nconfidence_penalty: 0.05\n")
    from_file = resolve_options(RUN, load_config(config_file), {})
    assert (from_file.augment, from_file.validate_every, from_file.halve_start, from_file.halve_patience,
            from_file.halve_margin, from_file.anneal, from_file.sort_window, from_file.ema,
            from_file.confidence_penalty) == ("strong", 30, 0.25, 3, 2, 0.8, 4, 0.9, 0.05)
    config_file.write_text("network:\n  out: {class: ctc}\naugment: extreme\n")
    with pytest.raises(ValueError, match="augment"):
        load_config(config_file)
    for bad in ("ema: 1", "halve_margin: -1", "halve_margin: yes", "confidence_penalty: -1", "confidence_penalty: no"):
        config_file.write_text(f"network:\n  out: {{class: ctc}}\n{bad}\n")
        with pytest.raises(ValueError, match=bad.split(":")[0]):
            load_config(config_file)


@pytest.mark.parametrize("field, value", [("augment", "extreme"), ("validate_every", 0), ("halve_patience", 0),
                                          ("halve_start", 0.0), ("halve_start", 1.5), ("anneal", 1.0),
                                          ("sort_window", 0), ("sort_window", 2.5), ("sort_window", True),
                                          ("threads", -1), ("threads", 1.5), ("ema", 1.0), ("ema", -0.5),
                                          ("halve_margin", -0.5), ("halve_margin", 11),
                                          ("confidence_penalty", -0.1), ("confidence_penalty", 11)])
def test_bad_recipe_options_fail_with_their_name(field, value):
    with pytest.raises(ValueError, match=field):
        TrainOptions(data=Path("."), **{field: value})
