"""Word n-gram language models for decoding: estimated by :mod:`tfnhr.lm.kneser_ney`
(``tfnhr lm build``) on text as :mod:`tfnhr.lm.tokens` cuts it, with a language's word
frequencies (:mod:`tfnhr.lm.background`) for the words the text lacks; written and read as ARPA
files by :mod:`tfnhr.lm.arpa`.

May import: tfnhr.config.
"""

from tfnhr.lm.arpa import BOS, EOS, UNK, arpa_words, load_arpa, write_arpa
from tfnhr.lm.background import background_frequencies
from tfnhr.lm.kneser_ney import build_arpa, read_text_corpus
from tfnhr.lm.tokens import is_token_vocabulary, lm_tokens, token_sentence

__all__ = ["build_arpa", "read_text_corpus", "background_frequencies", "lm_tokens",
           "token_sentence", "is_token_vocabulary", "write_arpa", "load_arpa", "arpa_words", "BOS", "EOS", "UNK"]
