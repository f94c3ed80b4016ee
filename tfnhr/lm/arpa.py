"""ARPA files of word n-gram models: writing (what :mod:`tfnhr.lm.kneser_ney` estimates) and
reading (for :class:`tfnhr.decoding.BeamSearchDecoder`, through KenLM).

An ARPA file lists, per order ``n``, each n-gram's log10 probability and (below the highest order)
its log10 backoff weight::

    \\data\\
    ngram 1=5
    ...
    \\1-grams:
    -0.69897\tthe\t-0.30103
    ...
    \\end\\
"""

from __future__ import annotations

import os
from pathlib import Path

try:
    import kenlm
except ImportError:  # the lm extra is not installed: ARPA files are still written (tfnhr lm build)
    kenlm = None

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
"""The sentence start and end and the unknown-word tokens."""


def write_arpa(path: Path, words: list[str], logprobs: dict, backoffs: dict) -> None:
    """Write the model as an ARPA file (to a temporary file, renamed when complete)."""
    order = max(logprobs)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as out:
            out.write("\\data\\\n")
            out.writelines(f"ngram {n}={len(logprobs[n])}\n" for n in range(1, order + 1))
            for n in range(1, order + 1):
                out.write(f"\n\\{n}-grams:\n")
                bows = backoffs.get(n)  # none for the highest order
                for gram in sorted(logprobs[n]):
                    text = " ".join(words[i] for i in gram)
                    if bows is None:
                        out.write(f"{logprobs[n][gram]:.7g}\t{text}\n")
                    else:
                        out.write(f"{logprobs[n][gram]:.7g}\t{text}\t{bows.get(gram, 0.0):.7g}\n")
            out.write("\n\\end\\\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_arpa(path: str | Path) -> tuple[kenlm.Model, set[str]]:
    """The KenLM model of the ARPA file at ``path`` and its words (without ``<s>``, ``</s>``,
    ``<unk>``); ``ModuleNotFoundError`` without KenLM (the ``lm`` extra)."""
    if kenlm is None:
        raise ModuleNotFoundError("reading an ARPA model needs kenlm (the lm extra)", name="kenlm")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"language model file not found: {path}")
    words = arpa_words(path)
    if words is None:
        raise ValueError(f"{path} is not an ARPA file (its first non-empty line must be \\data\\)")
    config = kenlm.Config()
    config.show_progress = False
    config.arpa_complain = kenlm.ARPALoadComplain.NONE  # no "... faster if you build a binary file" on stderr
    try:
        return kenlm.Model(str(path), config), words
    except OSError as error:
        raise ValueError(f"{path} is not a valid ARPA file: {error}") from error


def arpa_words(path: Path) -> set[str] | None:
    """The unigrams of an ARPA file (without ``<s>``, ``</s>``, ``<unk>``); ``None`` if the file
    does not start like ARPA (first non-empty line ``\\data\\``)."""
    with open(path, "rb") as lines:
        for line in lines:
            if line.strip():
                if line.strip() != b"\\data\\":
                    return None
                break
        else:
            return None
        words = set()
        in_unigrams = False
        for line in lines:
            line = line.strip()
            if line.startswith(b"\\"):
                if in_unigrams:
                    break
                in_unigrams = line == b"\\1-grams:"
            elif in_unigrams and len(fields := line.split()) >= 2:  # log10 p, word[, log10 backoff]
                words.add(fields[1].decode("utf-8"))
    return words - {BOS, EOS, UNK}
