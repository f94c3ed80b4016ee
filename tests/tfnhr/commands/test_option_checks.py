"""Every option of every ``tfnhr`` sub-command is checked while parsing, before any work: a bad
value gives one line on stderr naming the option, and exit status 2. The table below is derived
from the parser itself, and a completeness test makes sure that no option escapes it."""

from __future__ import annotations

import argparse

import pytest

from tfnhr.cli import build_parser, leaf_parsers, main
from tfnhr.commands.common import process_count, shear_factors, width_factors
from tfnhr.config.train_options import size_pair
from tfnhr.config.ranges import Range

REQUIRED = {
    "info": [],
    "train": ["--data", "d"],
    "evaluate": ["--model", "m.keras", "--data", "d"],
    "recognize": ["--model", "m.keras", "x.png"],
    "export": ["--model", "m.keras", "--out", "o"],
    "synth": ["--out", "o"],
    "build": ["--text", "t.txt"],
    "convert": ["--from", "iam", "d", "--out", "o.h5"],
    "dump": ["--model", "m.keras", "--layer", "l", "--data", "d", "--out", "o.h5"],
    "serve": ["--model", "m.keras"],
}
"""Valid values of each sub-command's required arguments (keyed by the last word of its name)."""

FREE_FORM = {"--data", "--out", "--model", "--config", "--split", "--lm", "--json", "--access-log", "--text",
             "--host", "--layer", "--pages"}
"""Options whose values are paths or names: checked when used (a missing file is a one-line
error naming it, before any data is read), so no value is wrong while parsing."""


def bad_value(action: argparse.Action) -> str | None:
    """A value ``action`` must refuse while parsing; ``None`` for flags and free-form options."""
    if action.choices is not None:
        return "no-such-choice"
    range_ = getattr(action.type, "__self__", None)
    if isinstance(range_, Range):
        if range_.low is not None:
            return str(range_.low if range_.low_open else range_.low - 1)
        if range_.high is not None:
            return str(range_.high if range_.high_open else range_.high + 1)
        return "nan"
    if action.type is size_pair:
        return "2by4"
    if action.type is width_factors:
        return "1,0"
    if action.type is shear_factors:
        return "0,1.5"
    if action.type is process_count:
        return "0"
    if getattr(action.type, "__qualname__", "").startswith("each."):
        return "2,0"
    return None


def cases() -> list[tuple[str, str, str]]:
    """(command, option, bad value) for every checked option of every sub-command."""
    found = []
    for parser in leaf_parsers(build_parser()):
        for action in parser._actions:
            if action.option_strings and (value := bad_value(action)) is not None:
                found.append((parser.prog.split()[-1], action.option_strings[-1], value))
    return found


def test_every_option_is_checked_or_free_form_or_a_flag():
    unchecked = []
    for parser in leaf_parsers(build_parser()):
        for action in parser._actions:
            if (action.option_strings and action.nargs != 0 and bad_value(action) is None
                    and action.option_strings[-1] not in FREE_FORM):
                unchecked.append(f"{parser.prog} {action.option_strings[-1]}")
    assert not unchecked, f"options with no parse-time check: {unchecked}"
    assert len(cases()) >= 60  # sanity: the table is not empty by accident


@pytest.mark.parametrize("command, option, value", cases())
def test_a_bad_value_is_one_line_and_exit_2(command, option, value, capsys):
    prefix = ["lm", "build"] if command == "build" else [command]
    with pytest.raises(SystemExit) as exit_:
        main([*prefix, *REQUIRED[command], option, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"tfnhr {' '.join(prefix)}: error: argument {option}"), err
    assert "--help" in err


@pytest.mark.parametrize("option, value, message", [
    ("--epochs", "-1", "expected an integer >= 1, got '-1'"),
    ("--lr", "-1", "expected a number > 0, got '-1'"),
    ("--lr", "abc", "expected a number > 0, got 'abc'"),
    ("--dropout", "1", "expected a number in [0, 1), got '1'"),
    ("--confidence-penalty", "-0.1", "expected a number in [0, 10], got '-0.1'"),
    ("--units", "2,0,50", "expected an integer >= 1, got '0'"),
    ("--time-limit", "-1", "expected a number >= 0 or none, got '-1'"),
])
def test_train_messages_say_the_range(option, value, message, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--data", "d", option, value])
    assert message in capsys.readouterr().err


def test_port_out_of_range_is_an_error_not_a_traceback(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--model", "m.keras", "--port", "70000"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == ("tfnhr serve: error: argument --port: expected an integer in [0, 65535], "
                                       "got '70000' (see tfnhr serve --help)\n")


@pytest.mark.parametrize("line, field", [("epochs: 0", "epochs"), ("learning_rate: -1", "learning_rate"),
                                         ("batch_pixels: 0", "batch_pixels"), ("height: 0", "height")])
def test_config_files_get_the_same_checks_before_data_is_read(tmp_path, capsys, line, field):
    config = tmp_path / "net.yaml"
    config.write_text(f"network:\n  out: {{class: ctc}}\n{line}\n")
    assert main(["train", "--data", str(tmp_path / "no-such-data"), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tfnhr train: error:") and err.count("\n") == 1, err
    assert f"{field}' must be" in err or f"{field} must be" in err, err
    assert "no-such-data" not in err  # refused before the data


def _help_parsers() -> list[argparse.ArgumentParser]:
    """Every parser a user asks for --help: the tfnhr sub-commands, the main job, the Horovod job."""
    from horovod_jobs.train import build_parser as horovod_parser
    from tfnhr.commands.main_job import build_parser as main_job_parser

    return [*leaf_parsers(build_parser()), main_job_parser(), horovod_parser("nhr"), horovod_parser("mlcn")]


def test_help_names_defaults_that_say_something():
    """No '(default: None)' under options whose help says what happens without them, no
    '(default: False)' under flags, no second default where the help names its own; valued
    defaults are still shown, sequences as typed; descriptions are whole sentences."""
    for parser in _help_parsers():
        assert not parser.description or parser.description.endswith("."), parser.prog  # whole sentences
        text = " ".join(parser.format_help().split())
        assert "(default: None)" not in text and "(default: False)" not in text, parser.prog
        for action in parser._actions:
            if action.help and ("(default" in action.help or "default:" in action.help):
                assert " ".join(action.help.split()) + " (default:" not in text, (parser.prog, action.dest)
    commands = {parser.prog: " ".join(parser.format_help().split()) for parser in leaf_parsers(build_parser())}
    assert "(default: runs/recognizer)" in commands["tfnhr train"]
    assert "1: read once (default: 1)" in commands["tfnhr recognize"]  # 'default' as a value is no default
    assert "0: unsheared (default: 0)" in commands["tfnhr recognize"]
