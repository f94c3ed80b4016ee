"""What the ``tfnhr`` sub-commands share: argument types, the decoder's argument group and the
one error wrapper (the data arguments and the help formatter are in :mod:`tfnhr.config`). Only
:mod:`tfnhr.config` is imported at the top, so ``--help`` needs no TensorFlow."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path

from tfnhr.config.choices import DECODERS, ENSEMBLE_SHEARS, ENSEMBLE_WIDTHS
from tfnhr.config.options import command_line_message
from tfnhr.config.ranges import COUNT, SHEAR, WIDTH_FACTOR, Range, each

USER_ERRORS: tuple[type[Exception], ...] = (FileNotFoundError, ValueError)
"""What a command reports as one line with exit status 2 (bad input, not a bug)."""


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr, ``PROG: error: MESSAGE (see PROG
    --help)``, with exit status 2; its sub-command parsers are of the same class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def reports_errors(command: str, errors: tuple[type[Exception], ...] = USER_ERRORS
                   ) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Decorate a command's ``run(args)``: ``errors`` it raises are printed as one line
    ``tfnhr COMMAND: error: MESSAGE`` on stderr and make the exit status 2."""

    def decorate(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @functools.wraps(run)
        def wrapped(args: argparse.Namespace) -> int:
            try:
                return run(args)
            except errors as error:
                print(f"tfnhr {command}: error: {command_line_message(error)}", file=sys.stderr)
                return 2

        return wrapped

    return decorate


def add_decoder_arguments(parser: argparse.ArgumentParser) -> None:
    """Beam-search/LM options (evaluate, recognize, serve)."""
    parser.add_argument("--lm", type=Path, default=None, help="ARPA word n-gram model (tfnhr lm build)")
    parser.add_argument("--beam-width", type=COUNT.type, default=25, help="hypotheses kept per column")
    parser.add_argument("--alpha", type=Range(0).type, default=0.5, help="LM weight")
    parser.add_argument("--beta", type=Range().type, default=1.0, help="word insertion bonus")
    parser.add_argument("--closed-vocabulary", action="store_true",
                        help="only words of the LM's vocabulary may be output")
    parser.add_argument("--widths", type=width_factors, default=(1.0,), metavar="F1,F2,...|default",
                        help="read each image at these factors of its width (one model call each) and keep "
                             "the text the widths agree on (the highest CTC likelihood averaged over them); 'default': "
                             + ",".join(f"{w:g}" for w in ENSEMBLE_WIDTHS) + "; 1: read once")
    parser.add_argument("--shears", type=shear_factors, default=(0.0,), metavar="S1,S2,...|default",
                        help="also read each image sheared by these amounts (px per px of height), each at "
                             "every --widths factor, and keep the text all the views agree on; 'default': "
                             + ",".join(f"{s:g}" for s in ENSEMBLE_SHEARS) + " (3x the model calls); 0: unsheared")


def add_decoding_processes(parser: argparse.ArgumentParser) -> None:
    """``--decoding-processes`` (evaluate, recognize: many lines at once): the beam searches of a
    batch in worker processes."""
    parser.add_argument("--decoding-processes", type=process_count, default="auto", metavar="N|auto",
                        help="run the beam searches of a batch in N worker processes (the search is Python, one "
                             "core each); auto: one per usable core; 1: in this process")


def process_count(text: str) -> int:
    """``--decoding-processes``, ``--processes``: ``"auto"`` (:func:`tfnhr.runtime.stack.usable_cores`) or a count >= 1."""
    from tfnhr.runtime.stack import usable_cores

    return usable_cores() if text.strip().lower() == "auto" else COUNT.type(text)


def width_factors(text: str) -> tuple[float, ...]:
    """``--widths``: ``"default"`` (:data:`tfnhr.config.choices.ENSEMBLE_WIDTHS`) or distinct
    comma-separated factors in :data:`tfnhr.config.ranges.WIDTH_FACTOR`."""
    return _distinct_factors(text, ENSEMBLE_WIDTHS, WIDTH_FACTOR, "width factors")


def shear_factors(text: str) -> tuple[float, ...]:
    """``--shears``: ``"default"`` (:data:`tfnhr.config.choices.ENSEMBLE_SHEARS`) or distinct
    comma-separated shears in :data:`tfnhr.config.ranges.SHEAR`."""
    return _distinct_factors(text, ENSEMBLE_SHEARS, SHEAR, "shears")


def _distinct_factors(text: str, default: tuple[float, ...], allowed: Range, what: str) -> tuple[float, ...]:
    """``default`` for ``"default"``, else the distinct comma-separated numbers of ``text`` in ``allowed``."""
    if text.strip().lower() == "default":
        return default
    factors = each(allowed)(text)
    if len(set(factors)) != len(factors):
        raise argparse.ArgumentTypeError(f"expected distinct {what}, got {text!r}")
    return tuple(float(factor) for factor in factors)


def add_decoder_choice(parser: argparse.ArgumentParser) -> None:
    """``--decoder`` (default beam+lm with ``--lm``, else greedy) and the beam/LM options
    (recognize, serve)."""
    add_decoder_arguments(parser)
    parser.add_argument("--decoder", choices=DECODERS, default=None,
                        help="default: beam+lm with --lm, else greedy")


def use_device(device: str) -> None:
    """Make TensorFlow run on ``device`` (:data:`tfnhr.config.choices.DEVICES`): ``cpu`` hides the GPUs,
    ``gpu`` requires one (``ValueError`` naming what TensorFlow sees), ``auto`` changes nothing.
    Call before the model is built or loaded."""
    if device == "auto":
        return
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if device == "cpu":
        tf.config.set_visible_devices([], "GPU")
    elif not gpus:
        raise ValueError("--device gpu: TensorFlow sees no GPU (this is a CPU-only TensorFlow, or no driver); "
                         "use --device cpu or auto")


def decoder_from_args(name: str | None, args: argparse.Namespace, charset):
    """The decoder ``name`` (``None``: beam+lm with ``--lm``, else greedy) configured by the
    beam/LM arguments (:func:`tfnhr.decoding.make_decoder`)."""
    from tfnhr.decoding import make_decoder

    name = name or ("beam+lm" if args.lm else "greedy")
    return make_decoder(name, charset, beam_width=args.beam_width, lm=args.lm, alpha=args.alpha, beta=args.beta,
                        closed_vocabulary=args.closed_vocabulary, processes=getattr(args, "decoding_processes", 1))


def transcriber_from_args(model, args: argparse.Namespace):
    """A :class:`tfnhr.recognition.transcriber.Transcriber` of ``model`` with ``args``' decoder (``--decoder``
    and the beam/LM arguments), ``--batch-pixels``, ``--widths`` and ``--shears`` (recognize, serve)."""
    from tfnhr.recognition.transcriber import Transcriber

    return Transcriber(model, decoder_from_args(args.decoder, args, model.charset), args.batch_pixels,
                       widths=args.widths, shears=args.shears)
