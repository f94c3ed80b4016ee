"""Options declared once, on the fields of a dataclass, and everything generated from them:
command-line arguments, range checks, the defaults that ``--help`` shows, the keys of config
files and the flags that reproduce a set of values. TensorFlow-free.

A field declared with :func:`option` carries an :class:`Option` in its metadata::

    @dataclasses.dataclass
    class Settings:
        epochs: int = option(80, "maximum passes over the training set", range=COUNT,
                             config="epochs", config_unit="passes")

    add_option_arguments(parser, Settings)  # --epochs, checked while parsing
    check_ranges(Settings(epochs=0))        # ValueError: epochs must be an integer >= 1, got 0
    config_checks(Settings)["epochs"]       # (check, "an integer >= 1 (passes)")
    option_flags(Settings(epochs=5))        # ["--epochs", "5"]
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tfnhr.config.ranges import Range, check_each, each

NO_FLAG = ""
""":attr:`Option.flag` of a field that no command line sets (it comes from elsewhere, e.g. a config file)."""


@dataclasses.dataclass(frozen=True)
class Option:
    """How one field is offered and checked.

    ``help``: the help text, without the default (added from the field's default). ``range``:
    the allowed numbers (checked while parsing and by :func:`check_ranges`); ``each``: the range
    of every number of a tuple written ``1,2,3``. ``choices``: the allowed names. ``parse``: the
    argparse ``type`` when neither range applies; ``nargs``: argparse's, with ``convert`` turning
    the parsed list into the field's value and ``format`` a value back into command-line words.
    ``flag``: the command-line name (default ``--`` and the field name with dashes;
    :data:`NO_FLAG`: none). ``const``: the flag takes no value and sets the field to this
    (e.g. ``--quiet`` setting verbosity 0). ``metavar``: argparse's. ``given_only``: the flag
    sets the field only when given, so that a config file can supply it (its default is then
    shown in the help text). ``config``: the key that sets the field in a config file
    (``None``: none); ``config_names``: a config file's names of the values -> the field's
    values; ``config_unit``: what the number means, for config-file errors; ``config_check``: the
    check of a config value when range and choices do not say it. ``model``: the field describes
    the hand-built network (a config file's network replaces it).
    """

    help: str
    range: Range | None = None
    each: Range | None = None
    choices: tuple[str, ...] | None = None
    parse: Callable[[str], Any] | None = None
    nargs: str | None = None
    convert: Callable[[Any], Any] | None = None
    format: Callable[[Any], list[str]] | None = None
    flag: str | None = None
    const: Any = None
    metavar: str | None = None
    given_only: bool = False
    config: str | None = None
    config_names: Mapping[str, Any] | None = None
    config_unit: str = ""
    config_check: Callable[[Any], bool] | None = None
    model: bool = False


class OptionError(ValueError):
    """A problem the caller fixes by changing a setting, named in the caller's own terms.

    ``template`` holds ``{name}`` placeholders; each keyword gives a setting's two spellings,
    ``(python, command_line)``, or a value that reads the same in both (a path, a count).
    ``str(error)`` speaks Python (what the API caller sets), :meth:`for_command_line` speaks flags
    (what the CLIs print)::

        error = OptionError("{path}: continue it with {resume}", path="runs/x", resume=("resume=True", "--resume"))
        str(error)                 # 'runs/x: continue it with resume=True'
        error.for_command_line()   # 'runs/x: continue it with --resume'
    """

    def __init__(self, template: str, **settings: Any):
        self.template = template
        self.settings = {name: spelled if isinstance(spelled, tuple) else (spelled, spelled)
                         for name, spelled in settings.items()}
        super().__init__(template.format(**{name: python for name, (python, _) in self.settings.items()}))

    def for_command_line(self) -> str:
        """The message with the settings spelled as command-line flags."""
        return self.template.format(**{name: flag for name, (_, flag) in self.settings.items()})


def command_line_message(error: BaseException) -> str:
    """``error``'s message on one line, settings spelled as flags (:class:`OptionError`): what a
    command line prints."""
    text = error.for_command_line() if isinstance(error, OptionError) else str(error)
    return " ".join(text.splitlines())


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that ends an option's line with its default where that says something: not for
    flags (no value: off unless given), options whose default is ``None`` (their help says what happens
    without them) or helps that already name their default; sequences as they are typed."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        names_its_default = any(mark in (action.help or "") for mark in ("(default", "default:"))
        if action.default is None or action.default is False or action.nargs == 0 or names_its_default:
            return action.help
        if isinstance(action.default, (tuple, list)):  # as it is typed: 1,2 rather than (1, 2)
            typed = ",".join(f"{value:g}" if isinstance(value, float) else str(value) for value in action.default)
            return f"{action.help} (default: {typed})"
        return super()._get_help_string(action)


def option(default: Any, help: str, **declaration: Any) -> Any:
    """A dataclass field with ``default`` and its :class:`Option` (``help`` and ``declaration``)."""
    spec = Option(help, **declaration)
    if isinstance(default, (list, dict, set)):
        raise TypeError("option defaults must be immutable (use a tuple)")
    return dataclasses.field(default=default, metadata={"option": spec})


def declared(cls: type) -> list[tuple[dataclasses.Field, Option]]:
    """The fields of dataclass ``cls`` that carry an :class:`Option`, in declaration order."""
    return [(field, field.metadata["option"]) for field in dataclasses.fields(cls) if "option" in field.metadata]


def declaration(cls: type, name: str) -> Option:
    """The :class:`Option` of field ``name`` of dataclass ``cls``."""
    return next(spec for field, spec in declared(cls) if field.name == name)


def flag_name(field: dataclasses.Field, spec: Option) -> str | None:
    """The command-line name of ``field`` (``None`` for :data:`NO_FLAG`)."""
    if spec.flag == NO_FLAG:
        return None
    return spec.flag or "--" + field.name.replace("_", "-")


def check_ranges(values: Any) -> None:
    """``ValueError`` naming the first field of dataclass instance ``values`` outside its range
    or choices."""
    for field, spec in declared(type(values)):
        value = getattr(values, field.name)
        if spec.range is not None:
            spec.range.check(field.name, value)
        if spec.each is not None:
            check_each(field.name, value, spec.each)
        if spec.choices is not None and spec.config_check is None and value not in spec.choices:
            raise ValueError(f"{field.name} must be one of {spec.choices}, got {value!r}")


def _shown(value: Any) -> str:
    """A default as it is typed on a command line."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return " ".join(f"{item[0]}x{item[1]}" if isinstance(item, tuple) else str(item) for item in value) \
            if value and isinstance(value[0], tuple) else ",".join(str(item) for item in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def help_text(field: dataclasses.Field, spec: Option) -> str:
    """The help of ``field``: its declared help and, for a ``given_only`` option (whose parsed
    default is absent), its default where that says something; the other options' defaults are
    shown by :class:`DefaultsHelpFormatter`."""
    default = field.default
    if not spec.given_only or default is None:
        return spec.help
    return f"{spec.help} (default {_shown(default)})"


def add_option_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type,
                         fields: Sequence[str] | None = None) -> None:
    """Add the command-line options of dataclass ``cls``'s declared fields (those named in
    ``fields``, default all) to ``parser``. Each sets its field's name; a ``given_only`` option
    is absent from the parsed namespace unless given (read them with :func:`given_values`)."""
    for field, spec in declared(cls):
        name = flag_name(field, spec)
        if name is None or (fields is not None and field.name not in fields):
            continue
        default = argparse.SUPPRESS if spec.given_only else field.default
        kwargs: dict[str, Any] = {"dest": field.name, "default": default, "help": help_text(field, spec)}
        if spec.const is not None:
            kwargs.update(action="store_const", const=spec.const)
        elif field.type in ("bool", bool):
            kwargs["action"] = argparse.BooleanOptionalAction if spec.given_only else "store_true"
        else:
            kwargs["type"] = (spec.range.type if spec.range is not None else each(spec.each)
                              if spec.each is not None else spec.parse)
            if spec.choices is not None:
                kwargs["choices"] = spec.choices
            if spec.nargs is not None:
                kwargs["nargs"] = spec.nargs
            if spec.metavar is not None or spec.choices is None:
                kwargs["metavar"] = spec.metavar or name[2:].upper().replace("-", "_")
        if kwargs.get("type") is None:
            kwargs.pop("type", None)
        if field.default is dataclasses.MISSING:
            kwargs.update(required=True, default=None)
        parser.add_argument(name, **kwargs)


def given_values(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The values of ``cls``'s declared fields found in parsed ``args`` (the ``given_only`` ones only
    when they were given), converted to the fields' values."""
    values = {}
    for field, spec in declared(cls):
        if hasattr(args, field.name) and flag_name(field, spec) is not None:
            value = getattr(args, field.name)
            values[field.name] = spec.convert(value) if spec.convert is not None and value is not None else value
    return values


def option_flags(values: Any) -> list[str]:
    """Command-line words that reproduce dataclass instance ``values``: the flags of every
    declared field whose value differs from its default (a required field has none).
    ``ValueError`` for such a field that no flag sets."""
    words: list[str] = []
    for field, spec in declared(type(values)):
        value = getattr(values, field.name)
        if value == field.default:
            continue
        name = flag_name(field, spec)
        if name is None:
            raise ValueError(f"{field.name}={value!r} has no command-line flag")
        if spec.const is not None:
            words += [name] if value == spec.const else []
        elif isinstance(value, bool):
            words += [name] if value else ([f"--no-{name[2:]}"] if spec.given_only else [])
        elif spec.format is not None:
            words += [name, *spec.format(value)]
        elif isinstance(value, tuple):
            words += [name, ",".join(str(item) for item in value)]
        else:
            words += [name, "none" if value is None else str(value)]
    return words


def config_checks(cls: type) -> dict[str, tuple[Callable[[Any], bool], str]]:
    """Config-file key -> (check of a value, what it must be in words) of ``cls``'s fields that
    a config file may set. Numbers are checked against the field's range, integers written as
    JSON/YAML integers (``2``, not ``2.0``)."""
    checks = {}
    for _field, spec in declared(cls):
        if spec.config is None:
            continue
        names = tuple(spec.config_names) if spec.config_names is not None else spec.choices
        if spec.config_check is not None:
            checks[spec.config] = (spec.config_check, spec.config_unit)
        elif names is not None:
            checks[spec.config] = ((lambda value, names=names: value in names), f"one of {', '.join(names)}")
        elif spec.range is not None:
            range_ = spec.range

            def check(value: Any, range_: Range = range_) -> bool:
                return range_.holds(value) and (not range_.integer or value is None or isinstance(value, int))

            unit = f" ({spec.config_unit})" if spec.config_unit else ""
            checks[spec.config] = (check, f"{range_.describe().replace(' or none', ' or null')}{unit}")
        else:
            checks[spec.config] = ((lambda value: isinstance(value, bool)), "true or false")
    return checks


def config_values(cls: type, training: Mapping[str, Any]) -> dict[str, Any]:
    """A config file's checked ``training`` parameters -> the values of ``cls``'s fields they set."""
    by_key = {spec.config: (field, spec) for field, spec in declared(cls) if spec.config is not None}
    values = {}
    for key, value in training.items():
        field, spec = by_key[key]
        values[field.name] = spec.config_names[value] if spec.config_names is not None else value
    return values


def model_fields(cls: type) -> list[str]:
    """The fields of ``cls`` that describe the hand-built network (:attr:`Option.model`)."""
    return [field.name for field, spec in declared(cls) if spec.model]


def flag_names(cls: type) -> dict[str, str]:
    """Field name -> its command-line name, for messages about given options."""
    return {field.name: name for field, spec in declared(cls) if (name := flag_name(field, spec)) is not None}

