"""CTC decoders: per-column class scores ``[T, C]`` -> text.

* :class:`GreedyDecoder` (:func:`greedy_decode`) — the best path: argmax per column, repeats
  collapsed, blanks dropped.
* :class:`BeamSearchDecoder` — prefix beam search, optionally with a word n-gram LM
  (:mod:`tfnhr.lm`) and/or a vocabulary.

Every decoder has ``decode(scores)``, ``decode_batch(scores_list)`` and ``reading_scores(texts)``
(what its LM adds to a text's score; zeros for decoders without one); :func:`make_decoder` builds
one by its name in :data:`tfnhr.config.choices.DECODERS`.

The beam search needs the ``lm`` extra (KenLM, pygtrie) and pyctcdecode, which a plain
``pip install tfnhr`` leaves out: without them ``BeamSearchDecoder`` is ``None``, asking
:func:`make_decoder` for a beam search raises :class:`DecoderUnavailable`, which says how to
install what is missing, and greedy decoding works as ever.

May import: tfnhr.charset, tfnhr.config, tfnhr.runtime, tfnhr.lm.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from tfnhr.charset import Charset
from tfnhr.config.choices import DECODERS
from tfnhr.config.options import OptionError
from tfnhr.decoding.greedy import GreedyDecoder, greedy_decode, greedy_decode_batch, log_softmax

try:
    from tfnhr.decoding.beam import BeamSearchDecoder
except ImportError as missing:  # the lm extra or pyctcdecode is not installed: greedy decoding still works
    BeamSearchDecoder = None
    BEAM_SEARCH_MISSING: str | None = (missing.name or "a package").split(".")[0]
else:
    BEAM_SEARCH_MISSING = None


class Decoder(Protocol):
    """What :class:`~tfnhr.recognition.transcriber.Transcriber` and :func:`tfnhr.evaluation.tables.evaluate` decode with."""

    def decode_batch(self, scores_list: Sequence[np.ndarray]) -> list[str]:
        """One text per ``[T_i, C]`` score array."""

    def reading_scores(self, texts: Sequence[str]) -> np.ndarray:
        """Per text, what the decoder adds to its CTC log-likelihood when it weighs readings
        (float64 ``[N]``, natural log): an LM's score, or zeros. Needed to read in several views."""


def make_decoder(name: str, charset: Charset, beam_width: int = 25, lm: str | Path | None = None,
                 alpha: float = 0.5, beta: float = 1.0, closed_vocabulary: bool = False, processes: int = 1) -> Decoder:
    """The decoder ``name`` (one of :data:`~tfnhr.config.choices.DECODERS`): ``greedy``, ``beam`` (no LM)
    or ``beam+lm`` (the ARPA file ``lm``, weight ``alpha``, word bonus ``beta``), the beam searches
    of a batch spread over ``processes`` worker processes. ``ValueError`` for an unknown name or
    ``beam+lm`` without ``lm``; :class:`DecoderUnavailable` for a beam search without its packages."""
    if name not in DECODERS:
        raise ValueError(f"decoder must be one of {', '.join(DECODERS)}, got {name!r}")
    if name == "greedy":
        return GreedyDecoder(charset)
    beam_decoder = beam_search_decoder_class()
    if name == "beam":
        return beam_decoder(charset, beam_width=beam_width, processes=processes)
    if lm is None:
        raise OptionError("the beam+lm decoder needs {lm} (an ARPA file from tfnhr lm build)",
                          lm=("an lm path", "--lm"))
    return beam_decoder(charset, beam_width=beam_width, lm_path=lm, alpha=alpha, beta=beta,
                        closed_vocabulary=closed_vocabulary, processes=processes)


__all__ = ["Decoder", "make_decoder", "GreedyDecoder", "BeamSearchDecoder", "greedy_decode", "greedy_decode_batch",
           "log_softmax"]


LM_INSTALL = ("pip install 'tfnhr[lm]' && pip install --no-deps pyctcdecode==0.5.0 (pyctcdecode's metadata "
              "asks for numpy<2, which TensorFlow 2.18's stack cannot take; it runs on numpy 2)")
"""How to add what the beam search needs to a plain install (``make setup`` installs it)."""


class DecoderUnavailable(ValueError):
    """The beam search's packages are not installed (a decoder this install cannot make, reported
    as bad input is); the message says how to install them."""


def beam_search_decoder_class() -> type:
    """:class:`tfnhr.decoding.beam.BeamSearchDecoder`; :class:`DecoderUnavailable` when
    pyctcdecode, KenLM or pygtrie is missing."""
    if BeamSearchDecoder is None:
        raise DecoderUnavailable(f"beam search needs {BEAM_SEARCH_MISSING}, which is not installed: {LM_INSTALL}")
    return BeamSearchDecoder
