"""Training options resolved from their sources: the declarations' defaults < a config file's
training parameters < options given (:func:`resolve_options`), and parsed command-line arguments
turned into :class:`~tfnhr.config.train_options.TrainOptions` (:func:`options_from_args`)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from tfnhr.config.options import config_values, flag_names, given_values, model_fields
from tfnhr.config.train_options import TrainOptions
from tfnhr.network.config_file import NetworkConfig, load_config


def resolve_options(defaults: Mapping, config: NetworkConfig | None, given: Mapping,
                    names: Mapping[str, str] | None = None) -> TrainOptions:
    """:class:`TrainOptions` from ``defaults`` (fields every run sets: ``data``, ``out``, ...),
    then ``config``'s training parameters and network (if any), then ``given`` (fields a user set
    explicitly, e.g. from flags); later ones win. ``ValueError`` for ``given`` model fields
    combined with a config (it describes the network), naming the field as ``names`` says (the
    caller's name for it, e.g. its flag)."""
    values = dict(defaults)
    if config is not None:
        clashing = [field for field in model_fields(TrainOptions) if field in given]
        if clashing:
            name = (names or {}).get(clashing[0], clashing[0])
            raise ValueError(f"the config file {config.source} describes the network; {name} cannot be combined with it")
        values.update(network=config.network, network_source=str(config.source))
        values.update(config_values(TrainOptions, config.training))
    values.update(given)
    return TrainOptions(**values)


def options_from_args(args: argparse.Namespace) -> TrainOptions:
    """The :class:`TrainOptions` of arguments parsed by a parser that
    :func:`~tfnhr.config.train_options.add_train_arguments` built: the declarations' defaults,
    then the ``--config`` file's settings, then the flags given. ``ValueError`` for a bad config
    file or model flags combined with ``--config``."""
    config = load_config(args.config) if args.config is not None else None
    return resolve_options({}, config, given_values(args, TrainOptions), names=flag_names(TrainOptions))
