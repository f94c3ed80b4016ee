"""The character set of a recognizer: characters <-> CTC class indices.

Index 0 is the CTC blank; characters are 1..N in the order given. Characters not in the set
(e.g. in evaluation transcriptions) map to the unknown symbol :data:`UNKNOWN` (class N+1 when the
set has one, see ``with_unknown``) and are counted, never dropped silently.

May import: nothing of the project.
"""

from __future__ import annotations

import collections
import json
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

UNKNOWN = "\N{REPLACEMENT CHARACTER}"
"""The unknown symbol: stands for any character outside the set (U+FFFD)."""

BLANK_INDEX = 0
"""The CTC blank's class index."""


class Charset:
    """An ordered set of characters; class ``i + 1`` is ``chars[i]``, class 0 the CTC blank.

    Args:
        chars: the characters, each a one-character string, without repeats.
        with_unknown: append :data:`UNKNOWN` as the last class, so unknown characters in
            evaluation data have a class of their own (their count is kept in ``unknown_counts``).
    """

    def __init__(self, chars: Iterable[str], with_unknown: bool = True) -> None:
        chars = list(chars)
        bad = [c for c in chars if not isinstance(c, str) or len(c) != 1]
        if bad:
            raise ValueError(f"charset entries must be single characters, got {bad[:5]!r}")
        repeated = [c for c, n in collections.Counter(chars).items() if n > 1]
        if repeated:
            raise ValueError(f"charset has repeated characters: {repeated[:5]!r}")
        if UNKNOWN in chars:
            chars.remove(UNKNOWN)
            with_unknown = True
        if not chars:
            raise ValueError("a charset needs at least one character")
        self.chars: list[str] = chars + ([UNKNOWN] if with_unknown else [])
        self.with_unknown = with_unknown
        self._index = {c: i + 1 for i, c in enumerate(self.chars)}
        self.unknown_counts: collections.Counter[str] = collections.Counter()
        """How often each out-of-set character was mapped to :data:`UNKNOWN` by :meth:`encode`."""

    @classmethod
    def from_texts(cls, texts: Iterable[str], with_unknown: bool = True) -> "Charset":
        """The characters occurring in ``texts``, sorted by code point."""
        seen: set[str] = set()
        for text in texts:
            seen.update(text)
        seen.discard(UNKNOWN)
        return cls(sorted(seen), with_unknown=with_unknown)

    @property
    def num_classes(self) -> int:
        """Output classes of a model over this set: characters + 1 (the blank)."""
        return len(self.chars) + 1

    def __len__(self) -> int:
        return len(self.chars)

    def __contains__(self, char: str) -> bool:
        return char in self._index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Charset) and self.chars == other.chars

    def __repr__(self) -> str:
        return f"Charset({''.join(self.chars)!r})"

    def encode(self, text: str, count_unknown: bool = True) -> list[int]:
        """Class indices (1..N) of ``text``. Unknown characters map to :data:`UNKNOWN`'s class
        (counted in ``unknown_counts`` unless ``count_unknown`` is False); without an unknown
        class they raise ``ValueError``."""
        indices = []
        for char in text:
            index = self._index.get(char)
            if index is None:
                if not self.with_unknown:
                    raise ValueError(f"character {char!r} of {text!r} is not in the charset "
                                     "(build it with with_unknown=True to map such characters)")
                if count_unknown:
                    self.unknown_counts[char] += 1
                index = self._index[UNKNOWN]
            indices.append(index)
        return indices

    def decode(self, indices: Iterable[int]) -> str:
        """Text of class indices; blanks (0) are skipped. No CTC collapsing (see tfnhr.decoding)."""
        out = []
        for index in indices:
            index = int(index)
            if index == BLANK_INDEX:
                continue
            if not 0 < index <= len(self.chars):
                raise ValueError(f"class index {index} is outside 0..{len(self.chars)}")
            out.append(self.chars[index - 1])
        return "".join(out)

    def warn_unknown(self, what: str = "the data") -> None:
        """Warn once with the counts of characters mapped to :data:`UNKNOWN`, if any, and reset them."""
        if self.unknown_counts:
            total = sum(self.unknown_counts.values())
            listing = ", ".join(f"{c!r}×{n}" for c, n in self.unknown_counts.most_common(10))
            warnings.warn(f"{total} characters of {what} are not in the charset and were mapped to "
                          f"{UNKNOWN!r}: {listing}", stacklevel=2)
            self.unknown_counts.clear()

    def to_config(self) -> dict:
        """JSON-able description (saved with the model)."""
        chars = self.chars[:-1] if self.with_unknown else self.chars
        return {"chars": "".join(chars), "with_unknown": self.with_unknown}

    @classmethod
    def from_config(cls, config: dict) -> "Charset":
        return cls(config["chars"], with_unknown=config["with_unknown"])

    def save(self, path: str | Path) -> None:
        """Write the charset as JSON."""
        Path(path).write_text(json.dumps(self.to_config(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> "Charset":
        """Read a charset written by :meth:`save`."""
        return cls.from_config(json.loads(Path(path).read_text(encoding="utf-8")))

    def labels_for_decoder(self) -> Sequence[str]:
        """Class labels with the blank as ``""`` at index 0 (the layout pyctcdecode expects)."""
        return [""] + self.chars
