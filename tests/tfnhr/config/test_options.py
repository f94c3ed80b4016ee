"""Options declared once (:mod:`tfnhr.config.options`, :mod:`tfnhr.config.train_options`): a
declaration reaches the parser, the range checks, the help's defaults, the config-file keys and
the flags that reproduce a run, with nothing else to edit."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from tfnhr.commands.train import register
from tfnhr.config.options import (add_option_arguments, config_checks, config_values, declared, flag_name,
                                  given_values, option, option_flags)
from tfnhr.config.ranges import COUNT
from tfnhr.config.train_options import TrainOptions
from tfnhr.network.config_file import TRAINING_KEYS
from tfnhr.training import options_from_args


def extended_options() -> type:
    """:class:`TrainOptions` with one more option, declared as a new option would be."""
    return dataclasses.make_dataclass(
        "ExtendedOptions", [("warmup", int, option(3, "warm-up updates", range=COUNT, given_only=True,
                                                   config="warmup", config_unit="updates"))],
        bases=(TrainOptions,))


def test_a_new_declaration_reaches_every_surface():
    extended = extended_options()
    parser = argparse.ArgumentParser()
    add_option_arguments(parser, extended)
    assert "warm-up updates (default 3)" in " ".join(parser.format_help().split())
    values = given_values(parser.parse_args(["--data", "d", "--warmup", "5"]), extended)
    assert extended(**values).warmup == 5
    assert "warmup" not in given_values(parser.parse_args(["--data", "d"]), extended)  # a config may supply it
    with pytest.raises(SystemExit):
        parser.parse_args(["--data", "d", "--warmup", "0"])
    with pytest.raises(ValueError, match="warmup must be an integer >= 1"):
        extended(data=Path("d"), warmup=0)
    check, expect = config_checks(extended)["warmup"]
    assert (check(5), check(0), check(2.0), expect) == (True, False, False, "an integer >= 1 (updates)")
    assert config_values(extended, {"warmup": 7, "schedule": "constant"}) == {"warmup": 7, "halve_on": "never"}
    options = extended(data=Path("d"), warmup=5)
    assert option_flags(options) == ["--data", "d", "--warmup", "5"]
    assert extended(**given_values(parser.parse_args(option_flags(options)), extended)) == options


def changed_value(field: dataclasses.Field, spec) -> object:
    """A valid value of ``field`` other than its default (for the round trip below)."""
    default = field.default
    if spec.const is not None:
        return spec.const
    if field.type == "bool":
        return not default
    if spec.choices is not None:
        return next(choice for choice in spec.choices if choice != default)
    if spec.each is not None:
        return (3, 5)
    if field.name == "block":
        return ((3, 3), (2, 2))
    if spec.parse is Path:
        return Path("elsewhere")
    if spec.range is None:
        return "seeded:1"
    if default is None:
        return 2
    candidate = default + 1 if spec.range.integer else default / 2
    return candidate if spec.range.holds(candidate) else None


@pytest.mark.parametrize("name", [field.name for field, spec in declared(TrainOptions) if flag_name(field, spec)])
def test_every_train_option_round_trips_through_the_tfnhr_train_parser(name):
    """Each declared field changed alone: its flags (:func:`option_flags`, what the main job hands
    its Horovod workers) read back by ``tfnhr train``'s real parser give the same options."""
    field, spec = next((field, spec) for field, spec in declared(TrainOptions) if field.name == name)
    options = dataclasses.replace(TrainOptions(data=Path("d")), **{name: changed_value(field, spec)})
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    assert options_from_args(parser.parse_args(["train", *option_flags(options)])) == options


def test_config_files_take_exactly_the_declared_keys():
    declared_keys = {spec.config for _field, spec in declared(TrainOptions) if spec.config is not None}
    assert set(TRAINING_KEYS) == declared_keys
    assert {"learning_rate", "gradient_clip", "schedule", "epochs", "height"} <= declared_keys


def test_fields_without_a_flag_are_refused_as_flags():
    options = TrainOptions(data=Path("d"), network={"out": {"class": "ctc"}})
    with pytest.raises(ValueError, match="network=.* has no command-line flag"):
        option_flags(options)
