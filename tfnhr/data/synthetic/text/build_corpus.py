"""Rebuild ``train.txt`` / ``val.txt`` / ``test.txt`` here from WordNet 3.0's example sentences.

Run once by hand (the outputs are committed)::

    apt-get download wordnet-base && dpkg-deb -x wordnet-base_*.deb /tmp/wn
    python tfnhr/data/synthetic/text/build_corpus.py /tmp/wn/usr/share/wordnet

Each WordNet synset's gloss holds quoted usage examples ("he ran the race"). Kept: examples of 3+
words that, after NFKD folding to ASCII, use only :data:`tfnhr.data.synthetic.handwriting.CHARS`, with no
backtick quotes, not from a synset marked offensive/slang (usage-domain pointers or gloss words),
containing none of those synsets' words nor a few unsuitable ones (:data:`UNSUITABLE`). Each
example is capitalised and gets a final period when it has no final punctuation. Synsets (their
examples stay together) are shuffled with a fixed seed and dealt to the splits until each reaches
its size; a sentence whose letters-and-digits key already occurred in an earlier split is dropped,
so val/test sentences never occur in train.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import unicodedata
from pathlib import Path

from tfnhr.data.synthetic.handwriting import CHARS

HERE = Path(__file__).resolve().parent
SPLIT_BYTES = {"train": 400_000, "val": 48_000, "test": 48_000}
SEED = 20261130
FLAG_DOMAINS = {"disparagement", "ethnic_slur", "obscenity", "slang", "vulgarism", "profanity"}
FLAG_GLOSS = re.compile(r"offensive|obscen|vulgar|derogator|disparag|slur|slang|insult|taboo", re.I)
UNSUITABLE = re.compile(r"\b(porn\w*|(gang-)?rap(e|ed|es|ing|ist)|sadomasoch\w*|sexual\w*|negro\w*)\b", re.I)
"""Sentences left out of a corpus meant for demos."""


def read_synsets(wordnet: Path) -> list[tuple[str, list[str], list[str], str]]:
    """``(offset, lemmas, usage-domain offsets, gloss)`` of every synset in ``data.*``."""
    synsets = []
    for pos in ("noun", "verb", "adj", "adv"):
        for line in (wordnet / f"data.{pos}").read_text(encoding="latin-1").splitlines():
            if line.startswith("  "):  # the licence header
                continue
            head, gloss = line.split(" | ", 1)
            fields = head.split()
            lemmas = [fields[4 + 2 * i].lower() for i in range(int(fields[3], 16))]
            domains = re.findall(r";u (\d{8}) n", head)
            synsets.append((fields[0], lemmas, domains, gloss))
    return synsets


def normalise(example: str) -> str | None:
    """An example as a corpus sentence, or ``None`` when it does not qualify."""
    text = unicodedata.normalize("NFKD", example).encode("ascii", "ignore").decode()
    text = " ".join(text.split())
    if "`" in text or len(text.split()) < 3 or any(c not in CHARS for c in text) or UNSUITABLE.search(text):
        return None
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?\"'" else text + "."


def build(wordnet: Path) -> dict[str, list[str]]:
    """The sentences of each split."""
    synsets = read_synsets(wordnet)
    first_lemma = {offset: lemmas[0] for offset, lemmas, _, _ in synsets}
    flagged = {offset for offset, _, domains, gloss in synsets
               if FLAG_GLOSS.search(gloss) or FLAG_DOMAINS & {first_lemma.get(d) for d in domains}}
    blocked = {lemma for offset, lemmas, _, _ in synsets if offset in flagged
               for lemma in lemmas if "_" not in lemma}
    blocks = []
    for offset, _, _, gloss in synsets:
        if offset in flagged:
            continue
        sentences = [s for s in map(normalise, re.findall(r'"([^"]+)"', gloss))
                     if s and not blocked & set(re.findall(r"[a-z]+", s.lower()))]
        if sentences:
            blocks.append(sentences)
    random.Random(SEED).shuffle(blocks)
    splits: dict[str, list[str]] = {name: [] for name in SPLIT_BYTES}
    seen: set[str] = set()
    blocks_left = iter(blocks)
    for name, budget in SPLIT_BYTES.items():
        size = 0
        while size < budget:
            for sentence in next(blocks_left):
                key = re.sub(r"[^a-z0-9]", "", sentence.lower())
                if key not in seen:
                    seen.add(key)
                    splits[name].append(sentence)
                    size += len(sentence) + 1
    return splits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wordnet", type=Path, help="folder with WordNet 3.0's data.noun, data.verb, ...")
    args = parser.parse_args(argv)
    for name, sentences in build(args.wordnet).items():
        (HERE / f"{name}.txt").write_text("\n".join(sentences) + "\n", encoding="ascii")
        print(f"{name}: {len(sentences)} sentences, {sum(len(s) + 1 for s in sentences)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
