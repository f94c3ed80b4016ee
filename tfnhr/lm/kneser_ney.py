"""Estimating word n-gram language models for decoding (pure Python, no ``lmplz``); written as
ARPA files by :mod:`tfnhr.lm.arpa`.

The estimate is interpolated modified Kneser–Ney (Chen & Goodman 1998, as KenLM's ``lmplz``):

* each sentence is split on whitespace and padded as ``<s> w1 … wk </s>``;
* adjusted counts ``a``: raw counts for the highest order and for n-grams starting with ``<s>``,
  otherwise the number of distinct words seen to the left (continuation counts);
* per order, discounts ``D1, D2, D3+`` from the counts-of-counts ``t1..t4`` of the adjusted counts
  (``Y = t1 / (t1 + 2 t2)``, ``Dk = k - (k + 1) Y t(k+1) / tk``); where those are undefined or out
  of range (small corpora) the order falls back to ``0.5, 1, 1.5`` like ``lmplz --discount_fallback``;
  a fixed ``discount`` gives plain interpolated Kneser–Ney instead;
* ``p(w | h) = (a(hw) - D(a(hw))) / A(h) + γ(h) p(w | h')`` with ``A(h) = Σ_w a(hw)``,
  ``γ(h) = (D1 N1(h) + D2 N2(h) + D3+ N3+(h)) / A(h)`` and ``h'`` the context without its first
  word; unigrams are interpolated with the uniform distribution over the vocabulary (the words,
  ``</s>`` and ``<unk>``; ``<s>`` is never predicted) or, given a ``background`` of word
  frequencies (:mod:`tfnhr.lm.background`), with those frequencies
  (:func:`background_distribution`): the background's words join the vocabulary, and the unigram
  mass ``γ()`` that the discounts set aside goes to each word in proportion to its frequency
  rather than evenly, so that a word the corpus lacks is as likely as the language makes it.

Written as a backoff model, each listed n-gram carries its interpolated probability and each
context its ``γ`` as backoff weight, so the ARPA model is normalised (log10 units, as ARPA wants).
"""

from __future__ import annotations

import collections
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from tfnhr.lm.arpa import BOS, EOS, UNK, write_arpa

FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)
"""``D1, D2, D3+`` used for an order whose counts-of-counts give no valid estimate."""

_BOS_ID, _EOS_ID, _UNK_ID = 0, 1, 2
_RESERVED = frozenset((BOS, EOS, UNK))
_NEVER_LOG10 = -99.0  # ARPA's conventional log10 probability of <s>, which is never predicted


def read_text_corpus(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> Iterator[str]:
    """Sentences of UTF-8 text files, one per non-empty line, whitespace stripped and collapsed
    to single spaces; case and punctuation are kept so words match the recognizer's transcriptions."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    for path in paths:
        with open(path, encoding="utf-8-sig") as lines:
            for line in lines:
                sentence = " ".join(line.split())
                if sentence:
                    yield sentence


def build_arpa(sentences: Iterable[str], order: int = 3, out_path: str | os.PathLike = "lm.arpa",
               discount: float | None = None, background: Mapping[str, float] | None = None) -> dict:
    """Estimate an interpolated Kneser–Ney word model of ``order`` and write it as ARPA.

    Args:
        sentences: one sentence per item; words are split on whitespace.
        order: n-gram order, at least 2 (KenLM reads no unigram-only models).
        out_path: the ARPA file to write (replaced atomically).
        discount: ``None`` for modified Kneser–Ney with per-order ``D1, D2, D3+`` estimated from
            the counts, or a fixed discount in (0, 1) for every count.
        background: word -> frequency (positive) to interpolate the unigrams with instead of the
            uniform distribution (:func:`background_distribution`); its words join the
            vocabulary. ``None``: uniform, the vocabulary is the corpus's.

    Returns:
        statistics: ``path``, ``order``, ``sentences``, ``tokens`` (words, without ``<s>``/``</s>``),
        ``vocabulary`` (distinct words), ``ngrams`` (entries per order, ``{1: …, 2: …}``; order 1
        includes ``<s>``, ``</s>`` and ``<unk>``), ``discounts`` (``{n: (D1, D2, D3+)}``) and
        ``discount_fallback`` (orders that used :data:`FALLBACK_DISCOUNTS`), ``background`` (the
        words the background added to the corpus's).
    """
    if isinstance(sentences, str):
        raise TypeError("sentences must be an iterable of strings, not one string")
    if order < 2:
        raise ValueError(f"order must be >= 2 (KenLM loads no unigram-only models), got {order}")
    if discount is not None and not 0.0 < discount < 1.0:
        raise ValueError(f"a fixed discount must be in (0, 1), got {discount}")
    words, adjusted, stats = _count(sentences, order)
    corpus_words = len(words)
    base = None
    if background is not None:
        known = set(words)
        words += [word for word in background if word not in known]
        base = background_distribution(words, background)
    discounts, fallback = {}, []
    for n in range(1, order + 1):
        estimate = (discount,) * 3 if discount is not None else _modified_kn_discounts(adjusted[n].values())
        if estimate is None:
            estimate = FALLBACK_DISCOUNTS
            fallback.append(n)
        discounts[n] = estimate
    logprobs, backoffs = _estimate(adjusted, discounts, vocabulary_size=len(words) - 1, base=base)
    out_path = Path(out_path)
    write_arpa(out_path, words, logprobs, backoffs)
    return {"path": str(out_path), "order": order, **stats,
            "ngrams": {n: len(logprobs[n]) for n in range(1, order + 1)},
            "discounts": discounts, "discount_fallback": fallback, "background": len(words) - corpus_words}


def background_distribution(words: list[str], background: Mapping[str, float]) -> list[float]:
    """The unigram distribution a model with a background interpolates with, per entry of ``words``
    (index = id: ``<s>``, ``</s>``, ``<unk>``, then the vocabulary): each word's background
    frequency plus a floor, normalised; the floor is the background's smallest frequency, so that
    a word of the corpus the background lacks, ``</s>`` and ``<unk>`` count as its rarest word;
    ``<s>`` 0 (never predicted). ``ValueError`` for an empty background, a word that is empty,
    has whitespace or is reserved, or a frequency that is not positive and finite."""
    frequencies = list(background.values())
    if not frequencies:
        raise ValueError("the background has no words")
    odd = [word for word in background if word in _RESERVED or not word or len(word.split()) != 1 or word != word.strip()]
    if odd:
        raise ValueError(f"background words must be single words other than {sorted(_RESERVED)}, got {odd[:5]!r}")
    if not all(0.0 < f < math.inf for f in frequencies):
        raise ValueError("background frequencies must be positive and finite")
    floor = min(frequencies)
    weights = [0.0] + [background.get(word, 0.0) + floor for word in words[1:]]
    total = math.fsum(weights)
    return [weight / total for weight in weights]


def _count(sentences: Iterable[str], order: int) -> tuple[list[str], dict, dict]:
    """Word list (index = id: ``<s>``, ``</s>``, ``<unk>``, then the corpus words) and the adjusted
    counts ``{n: {id tuple: a}}``; ``<s>`` as a unigram is left out (it is never predicted)."""
    ids = {BOS: _BOS_ID, EOS: _EOS_ID, UNK: _UNK_ID}
    adjusted = {n: collections.Counter() for n in range(1, order + 1)}
    types = {n: set() for n in range(2, order)}  # n-gram types below the highest order
    num_sentences = num_tokens = 0
    for sentence in sentences:
        tokens = sentence.split()
        if not tokens:
            continue
        reserved = _RESERVED.intersection(tokens)
        if reserved:
            raise ValueError(f"the corpus may not contain the reserved words {sorted(reserved)}: {sentence!r}")
        num_sentences += 1
        num_tokens += len(tokens)
        padded = [_BOS_ID] + [ids.setdefault(w, len(ids)) for w in tokens] + [_EOS_ID]
        for n in range(1, order + 1):
            grams = [tuple(padded[i:i + n]) for i in range(len(padded) - n + 1)]
            if n == order:
                adjusted[n].update(grams)  # highest order: raw counts
            elif grams:
                adjusted[n][grams[0]] += 1  # the one n-gram starting with <s>: raw count
                if n > 1:
                    types[n].update(grams)
    if num_sentences == 0:
        raise ValueError("the corpus has no sentences (no non-empty lines)")
    # Every other n-gram has a left neighbour: count its distinct ones (<s> is only ever first).
    for n in range(2, order + 1):
        lower = adjusted[n - 1]
        for gram in adjusted[n].keys() if n == order else types[n]:
            lower[gram[1:]] += 1
    adjusted[1].pop((_BOS_ID,), None)
    words = sorted(ids, key=ids.get)
    return words, adjusted, {"sentences": num_sentences, "tokens": num_tokens, "vocabulary": len(words) - 3}


def _modified_kn_discounts(counts: Iterable[int]) -> tuple[float, float, float] | None:
    """``D1, D2, D3+`` from the counts-of-counts of adjusted counts, or ``None`` where the estimate
    is undefined (a count-of-count is 0) or some ``Dk`` falls outside ``(0, k)``."""
    t = collections.Counter(a for a in counts if a <= 4)
    if any(t[k] == 0 for k in range(1, 5)):
        return None
    y = t[1] / (t[1] + 2 * t[2])
    d = tuple(k - (k + 1) * y * t[k + 1] / t[k] for k in range(1, 4))
    return d if all(0.0 < d[k - 1] < k for k in range(1, 4)) else None


def _estimate(adjusted: dict, discounts: dict, vocabulary_size: int,
              base: list[float] | None = None) -> tuple[dict, dict]:
    """Interpolated probabilities ``{n: {gram: log10 p}}`` and backoff weights
    ``{n: {gram: log10 γ}}`` (for the n-grams that are contexts of (n+1)-grams); unigrams
    interpolated with ``base`` (a probability per word id, :func:`background_distribution`; every
    word of it gets a unigram) or, if ``None``, the uniform distribution over ``vocabulary_size``."""
    logprobs, backoffs = {}, {}
    lower_probs: dict = {}
    for n in sorted(adjusted):
        d1, d2, d3 = discounts[n]
        discount = (0.0, d1, d2, d3)  # by min(a, 3)
        totals = collections.defaultdict(lambda: [0, 0, 0, 0])  # context -> A, N1, N2, N3+
        for gram, a in adjusted[n].items():
            total = totals[gram[:-1]]
            total[0] += a
            total[a if a < 3 else 3] += 1
        gammas = {h: (d1 * n1 + d2 * n2 + d3 * n3) / a for h, (a, n1, n2, n3) in totals.items()}
        probs = {}
        for gram, a in adjusted[n].items():
            context = gram[:-1]
            if n > 1:
                lower = lower_probs[gram[1:]]
            else:
                lower = 1.0 / vocabulary_size if base is None else base[gram[0]]
            probs[gram] = (a - discount[a if a < 3 else 3]) / totals[context][0] + gammas[context] * lower
        if n == 1 and base is None:
            probs[(_UNK_ID,)] = gammas[()] / vocabulary_size
        elif n == 1:
            for word_id in range(_EOS_ID, len(base)):
                probs.setdefault((word_id,), gammas[()] * base[word_id])  # <unk> and words without counts
        else:
            backoffs[n - 1] = {h: math.log10(g) for h, g in gammas.items()}
        logprobs[n] = {gram: math.log10(p) for gram, p in probs.items()}
        lower_probs = probs
    logprobs[1][(_BOS_ID,)] = _NEVER_LOG10
    return logprobs, backoffs
