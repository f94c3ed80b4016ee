"""The charset (:mod:`tfnhr.charset`): saving and loading, encoding with the unknown class and
its counted warning, decoding and construction errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers.recorded_warnings import caught as _caught
from tfnhr.charset import UNKNOWN, Charset


def test_charset_round_trips(tmp_path):
    for charset in (Charset("éa b\u00df"), Charset("xy", with_unknown=False)):
        charset.save(tmp_path / "charset.json")
        loaded = Charset.load(tmp_path / "charset.json")
        assert loaded == charset and loaded.with_unknown == charset.with_unknown
        assert loaded.chars == charset.chars
        assert Charset.from_config(json.loads(json.dumps(charset.to_config()))) == charset
    assert json.loads((tmp_path / "charset.json").read_text(encoding="utf-8")) == {"chars": "xy",
                                                                                  "with_unknown": False}
    moved = Charset(["a", UNKNOWN, "b"], with_unknown=False)  # the unknown symbol forces the class
    assert moved.chars == ["a", "b", UNKNOWN] and moved.with_unknown
    assert moved.to_config() == {"chars": "ab", "with_unknown": True}
    assert Charset.from_config(moved.to_config()) == moved
    assert Charset.from_texts(["ba", "c a"]).chars == [" ", "a", "b", "c", UNKNOWN]


def test_charset_encode_unknown_and_warn():
    charset = Charset("abc")
    assert charset.num_classes == 5 and len(charset) == 4
    assert charset.encode("cab") == [3, 1, 2]
    assert charset.encode("axbyx") == [1, 4, 2, 4, 4]
    assert charset.unknown_counts == {"x": 2, "y": 1}
    with pytest.warns(UserWarning, match=r"3 characters of the test set.*'x'×2.*'y'×1"):
        charset.warn_unknown("the test set")
    assert not charset.unknown_counts
    _, messages = _caught(charset.warn_unknown)
    assert messages == []  # nothing left to report

    strict = Charset("abc", with_unknown=False)
    assert strict.num_classes == 4
    with pytest.raises(ValueError, match="'x'"):
        strict.encode("ax")


def test_charset_decode_and_construction_errors():
    charset = Charset("abc")  # classes: 1 a, 2 b, 3 c, 4 unknown
    assert charset.decode([0, 1, 0, 0, 2, 2, 3, 4, 0]) == "abbc" + UNKNOWN  # blanks only, no collapsing
    assert charset.decode(np.array([3, 0, 1], np.int64)) == "ca"
    for bad in ([5], [-1], [1, 7]):
        with pytest.raises(ValueError, match="outside"):
            charset.decode(bad)
    with pytest.raises(ValueError, match="outside"):
        Charset("abc", with_unknown=False).decode([4])
    with pytest.raises(ValueError, match="repeated"):
        Charset("abca")
    with pytest.raises(ValueError, match="single characters"):
        Charset(["a", "bc"])
    with pytest.raises(ValueError, match="at least one"):
        Charset("")
    assert charset.labels_for_decoder() == ["", "a", "b", "c", UNKNOWN]
