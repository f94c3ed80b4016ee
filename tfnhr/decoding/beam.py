"""CTC prefix beam search, optionally with a word n-gram language model and/or a vocabulary.

:class:`BeamSearchDecoder` without ``lm_path`` finds the most probable text; with ``lm_path`` (a
word n-gram model, see :mod:`tfnhr.lm`) and/or a ``vocabulary`` it scores each completed word with
``alpha · ln p_LM + beta``. Scores as in :mod:`tfnhr.decoding.greedy`.

A model whose every word is a token as :mod:`tfnhr.lm.tokens` makes them (lower case, punctuation
apart: what ``tfnhr lm build`` writes) is scored in those tokens: a decoded word ``"Tap."`` is
the tokens ``tap`` and ``.``, each scored and, if unknown, penalised; ``beta`` once per word. Any
other model (estimated on text as written) scores each whitespace-separated word as it stands.

The search runs on pyctcdecode. Its text is whitespace-normalised: ``" "`` separates words,
runs of spaces count as one and leading/trailing spaces are dropped (greedy decoding keeps them).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
import weakref
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import kenlm
import numpy as np
from pyctcdecode.alphabet import Alphabet
from pyctcdecode.constants import AVG_TOKEN_LEN, LOG_BASE_CHANGE_FACTOR
from pyctcdecode.decoder import BeamSearchDecoderCTC
from pyctcdecode.language_model import AbstractLanguageModel, LanguageModel
from pygtrie import CharTrie

from tfnhr.charset import Charset
from tfnhr.decoding.greedy import check_scores, log_softmax
from tfnhr.decoding.processes import DecodingPool
from tfnhr.lm.arpa import load_arpa
from tfnhr.lm.tokens import is_token_vocabulary, lm_tokens

OPEN_VOCABULARY_UNK_OFFSET = -10.0
"""Penalty of an out-of-vocabulary word (log10 units, scaled like LM scores: ``alpha · ln 10 ·``)
and of an out-of-vocabulary partial word (natural log) — pyctcdecode's default."""
CLOSED_VOCABULARY_UNK_OFFSET = -1000.0
"""The same penalty with ``closed_vocabulary=True``: out-of-vocabulary words practically never win."""


class BeamSearchDecoder:
    """CTC prefix beam search, optionally with a word n-gram language model and/or a vocabulary.

    Args:
        charset: the recognizer's characters; ``" "`` (if in it) separates words.
        beam_width: hypotheses kept per column.
        lm_path: a word n-gram model as an ARPA file (e.g. from ``tfnhr lm build``); ``None``: no LM.
        alpha: LM weight: a word adds ``alpha · ln p_LM(word | history)`` to the log score.
        beta: word insertion bonus, added per word when an LM or a vocabulary is used.
        vocabulary: the known words. ``None`` with an ``lm_path``: the LM's unigrams. With an
            LM, vocabulary words the LM lacks count as unknown too. Without an LM, in-vocabulary
            words score ``beta`` and others are penalised.
        closed_vocabulary: make out-of-vocabulary words (practically) impossible, instead of
            penalising them by :data:`OPEN_VOCABULARY_UNK_OFFSET`.
        token_min_logp: per column, classes with a lower log-probability are not tried (except the
            column's best); ``-inf`` tries all.
        beam_prune_logp: hypotheses scoring this much below the best are dropped; ``-inf`` keeps all.
        processes: :meth:`decode_batch` of at least two lines per process runs in this many
            worker processes (:class:`~tfnhr.decoding.processes.DecodingPool`, each with its own
            copy of this decoder); 1: in this process.
    """

    def __init__(self, charset: Charset, beam_width: int = 25, lm_path: str | Path | None = None,
                 alpha: float = 0.5, beta: float = 1.0, vocabulary: Iterable[str] | None = None,
                 closed_vocabulary: bool = False, *, token_min_logp: float = -5.0,
                 beam_prune_logp: float = -10.0, processes: int = 1) -> None:
        if beam_width < 1:
            raise ValueError(f"beam_width must be >= 1, got {beam_width}")
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        if closed_vocabulary and vocabulary is None and lm_path is None:
            raise ValueError("closed_vocabulary needs a vocabulary or an LM (lm_path)")
        self.charset = charset
        self.beam_width = beam_width
        self.token_min_logp = token_min_logp
        self.beam_prune_logp = beam_prune_logp
        unk_offset = CLOSED_VOCABULARY_UNK_OFFSET if closed_vocabulary else OPEN_VOCABULARY_UNK_OFFSET
        if isinstance(vocabulary, str):
            raise TypeError("vocabulary must be an iterable of words, not one string")
        words = given_words = None if vocabulary is None else {w for w in vocabulary if w}
        model = None
        if lm_path is not None:
            model, arpa_words = load_arpa(lm_path)
            words = arpa_words if words is None else words
        language_model: AbstractLanguageModel | None = None
        if words is not None:
            if not words:
                raise ValueError("the vocabulary is empty")
            _warn_unspellable(words, charset)
            if model is None:
                language_model = _VocabularyModel(words, alpha=alpha, beta=beta, unk_score_offset=unk_offset)
            else:
                scorer = _KenlmTokenModel if is_token_vocabulary(words) else _KenlmWordModel
                with _quiet_small_vocabulary():
                    language_model = scorer(model, words, alpha=alpha, beta=beta, unk_score_offset=unk_offset)
        self._language_model = language_model
        # Alphabet() directly, not Alphabet.build_alphabet(): the latter rewrites labels it finds
        # special ("|" -> " " without a space, BPE mode for any "▁"); ours are plain characters.
        alphabet = Alphabet(list(charset.labels_for_decoder()), is_bpe=False)
        self._decoder = BeamSearchDecoderCTC(alphabet, language_model)
        weakref.finalize(self, self._decoder.cleanup)  # pyctcdecode keeps the LM in a class registry
        self._pool = None if processes == 1 else DecodingPool(processes, BeamSearchDecoder, dict(
            charset=charset, beam_width=beam_width, lm_path=lm_path, alpha=alpha, beta=beta,
            vocabulary=None if given_words is None else sorted(given_words),
            closed_vocabulary=closed_vocabulary, token_min_logp=token_min_logp, beam_prune_logp=beam_prune_logp))

    def decode(self, scores: np.ndarray) -> str:
        """Most probable text (with the LM/vocabulary, best combined score) of ``scores [T, C]``."""
        scores = check_scores(scores, self.charset)
        if len(scores) == 0:
            return ""
        return self._decoder.decode(log_softmax(scores), beam_width=self.beam_width,
                                    beam_prune_logp=self.beam_prune_logp,
                                    token_min_logp=self.token_min_logp)

    def decode_batch(self, scores_list: Sequence[np.ndarray]) -> list[str]:
        """:meth:`decode` of each ``[T_i, C]`` array (in the worker processes when there are any
        and at least two arrays per process)."""
        if self._pool is None or len(scores_list) < 2 * self._pool.processes:
            return [self.decode(s) for s in scores_list]
        return self._pool.map([check_scores(s, self.charset) for s in scores_list])

    def close(self) -> None:
        """Stop the worker processes now rather than when the decoder is garbage-collected."""
        if self._pool is not None:
            self._pool.close()

    def reading_scores(self, texts: Sequence[str]) -> np.ndarray:
        """What the LM adds to each whole text's score when readings of several views are weighed
        (float64 ``[N]``, natural log; :mod:`tfnhr.recognition.views`): with a model of tokens (what
        ``tfnhr lm build`` writes), per word ``alpha · ln p_LM(word | history) + beta`` as the
        search added it, unknown tokens penalised, the sentence end included. Zeros without an LM,
        with a vocabulary alone, and with a model of words as written: its penalty of the many
        words it lacks made the views' choice worse (the full preset's model, beam + LM in 24
        views: validation 8.06 -> 8.44 %, test 1.14 -> 1.95 %; docs/lab/language-model.md)."""
        if not isinstance(self._language_model, _KenlmTokenModel):
            return np.zeros(len(texts))
        return np.array([_text_score(self._language_model, text) for text in texts], np.float64)


class _KenlmWordModel(LanguageModel):
    """pyctcdecode's KenLM scorer, except for the empty "word" it scores at the end of a hypothesis
    that is empty or ends in a space: that adds only ``</s>`` (pyctcdecode scores it as an unknown
    word, so the LM would all but forbid empty output)."""

    def score(self, prev_state: kenlm.State, word: str, is_last_word: bool = False) -> tuple[float, kenlm.State]:
        if word:
            return super().score(prev_state, word, is_last_word)
        end = self._get_raw_end_score(prev_state) if is_last_word else 0.0
        return self.alpha * end * LOG_BASE_CHANGE_FACTOR, prev_state


class _KenlmTokenModel(_KenlmWordModel):
    """The KenLM scorer of a model of :func:`~tfnhr.lm.tokens.lm_tokens`: a decoded word is scored
    as its tokens in turn (each unknown one penalised), ``beta`` added once per word; a partial
    word is unknown when a finished token of it or the prefix of its last one is."""

    def score_partial_token(self, partial_token: str) -> float:
        *finished, last = lm_tokens(partial_token) or [""]
        unknown = any(token not in self._unigram_set for token in finished) or not self._char_trie.has_node(last)
        penalty = self.unk_score_offset * unknown
        return penalty * max(1.0, len(partial_token) / AVG_TOKEN_LEN)

    def score(self, prev_state: kenlm.State, word: str, is_last_word: bool = False) -> tuple[float, kenlm.State]:
        log10_probability, state = 0.0, prev_state
        for token in lm_tokens(word):
            state, previous = kenlm.State(), state
            log10_probability += self._kenlm_model.BaseScore(previous, token, state)
            if token not in self._unigram_set:
                log10_probability += self.unk_score_offset
        if is_last_word:
            log10_probability += self._get_raw_end_score(state)
        return self.alpha * log10_probability * LOG_BASE_CHANGE_FACTOR + (self.beta if word else 0.0), state


def _text_score(model: AbstractLanguageModel, text: str) -> float:
    """The sum of ``model``'s scores of the words of ``text`` in turn from its start state, the
    last (or, for a text without words, the empty one) scored as the sentence's end: what the
    search added to the text's score."""
    words = text.split() or [""]
    state, total = model.get_start_state(), 0.0
    for position, word in enumerate(words, start=1):
        score, state = model.score(state, word, is_last_word=position == len(words))
        total += score
    return total


class _VocabularyModel(AbstractLanguageModel):
    """A word list in place of an LM: known words score ``beta``, unknown ones are penalised like
    pyctcdecode's LanguageModel penalises them (with LM log-probability 0)."""

    order = 1

    def __init__(self, words: set[str], alpha: float, beta: float, unk_score_offset: float) -> None:
        self._words = words
        self._trie = CharTrie.fromkeys(words)
        self.alpha, self.beta, self.unk_score_offset = alpha, beta, unk_score_offset

    def get_start_state(self) -> None:
        return None

    def score_partial_token(self, partial_token: str) -> float:
        if self._trie.has_node(partial_token):
            return 0.0
        return self.unk_score_offset * max(1.0, len(partial_token) / AVG_TOKEN_LEN)

    def score(self, prev_state: None, word: str, is_last_word: bool = False) -> tuple[float, None]:
        if not word:
            return 0.0, None
        unknown = self.unk_score_offset if word not in self._words else 0.0
        return self.alpha * unknown * LOG_BASE_CHANGE_FACTOR + self.beta, None


def _warn_unspellable(vocabulary: set[str], charset: Charset) -> None:
    """Warn when many vocabulary words use characters outside the charset (they can never be
    decoded: a sign of a vocabulary/LM that does not match the recognizer)."""
    unspellable = [w for w in vocabulary if not all(c in charset for c in w)]
    if len(unspellable) > 0.2 * len(vocabulary):
        warnings.warn(f"{len(unspellable)} of {len(vocabulary)} vocabulary words have characters outside "
                      f"the charset and can never be decoded, e.g. {sorted(unspellable)[:5]!r}", stacklevel=3)


@contextlib.contextmanager
def _quiet_small_vocabulary() -> Iterator[None]:
    """Drop pyctcdecode's "Only N unigrams passed as vocabulary" warning (it fires for any
    vocabulary under 1000 words) while the LM is built; its other warnings pass."""
    logger = logging.getLogger("pyctcdecode.language_model")

    def keep(record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Only %s unigrams passed")

    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)
