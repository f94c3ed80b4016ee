"""Word n-gram language models for decoding: estimated by :mod:`tfnhr.lm.kneser_ney`
(``tfnhr lm build``), written and read as ARPA files by :mod:`tfnhr.lm.arpa`."""

from tfnhr.lm.arpa import BOS, EOS, UNK, arpa_words, load_arpa, write_arpa
from tfnhr.lm.kneser_ney import build_arpa, read_text_corpus

__all__ = ["build_arpa", "read_text_corpus", "write_arpa", "load_arpa", "arpa_words", "BOS", "EOS", "UNK"]
