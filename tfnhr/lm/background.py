"""Word frequencies of a language at large, from the ``wordfreq`` package (Speer 2022: counts
pooled over Wikipedia, subtitles, news, books, web text and more), as the background that
:func:`tfnhr.lm.build_arpa` spreads a model's unseen-word probability over.

A model estimated on a few hundred kilobytes of text knows few of the words a reader meets: 13 %
of the main job's validation tokens are unknown to its training text; with the 100,000 most
frequent English words as background, 2 % are (docs/lab/language-model.md). The
words come as :mod:`tfnhr.lm.tokens` makes them (lower case, apostrophes inside words).
wordfreq's word lists are CC BY-SA 4.0 (its data's sources and licences: its README).
"""

from __future__ import annotations

import wordfreq

from tfnhr.config.choices import DEFAULT_BACKGROUND_WORDS, LM_BACKGROUND_LANGUAGES
from tfnhr.lm.tokens import lm_tokens


def background_frequencies(language: str = "en", words: int = DEFAULT_BACKGROUND_WORDS) -> dict[str, float]:
    """The ``words`` most frequent words of ``language`` (one of
    :data:`~tfnhr.config.choices.LM_BACKGROUND_LANGUAGES`, e.g. ``en``, ``de``, ``fr``) that are single
    tokens (:func:`tfnhr.lm.tokens.lm_tokens`), each with its frequency (occurrences per word of
    running text). ``ValueError`` for another language, or ``words`` < 1."""
    if words < 1:
        raise ValueError(f"the background needs at least one word, got {words}")
    if language not in LM_BACKGROUND_LANGUAGES:
        raise ValueError(f"no word frequencies for language {language!r}; there are for "
                         f"{', '.join(LM_BACKGROUND_LANGUAGES)}")
    return {word: wordfreq.word_frequency(word, language) for word in wordfreq.top_n_list(language, words)
            if lm_tokens(word) == [word]}
