"""The ARPA language-model builder: KenLM loads its files, the model is normalised, Kneser–Ney
probabilities match hand computations, and the ``tfnhr lm build`` command."""

from __future__ import annotations

import argparse
import random

import kenlm
import pytest

from tfnhr.commands import lm as lm_command
from tfnhr.lm import build_arpa, read_text_corpus
from tfnhr.lm.arpa import load_arpa


def load(path) -> kenlm.Model:
    config = kenlm.Config()
    config.show_progress = False
    return kenlm.Model(str(path), config)


def arpa_entries(path) -> dict[str, tuple[float, ...]]:
    """``{"w1 w2": (log10 p[, log10 backoff])}`` of an ARPA file."""
    entries = {}
    for line in open(path, encoding="utf-8"):
        fields = line.rstrip("\n").split("\t")
        if len(fields) >= 2:
            entries[fields[1]] = tuple(float(f) for f in fields[:1] + fields[2:])
    return entries


def conditional(model: kenlm.Model, history: list[str], word: str) -> float:
    """log10 p(word | <s> history) from KenLM."""
    state = kenlm.State()
    model.BeginSentenceWrite(state)
    for previous in history:
        following = kenlm.State()
        model.BaseScore(state, previous, following)
        state = following
    return model.BaseScore(state, word, kenlm.State())


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    rng = random.Random(0)
    words = [f"w{i}" for i in range(25)] + ["Mr.", "don't", ","]
    return [" ".join(rng.choice(words[: rng.randint(3, len(words))]) for _ in range(rng.randint(1, 9)))
            for _ in range(300)]


@pytest.mark.parametrize("order", [2, 3, 4])
def test_model_is_normalised(tmp_path, corpus, order):
    path = tmp_path / "lm.arpa"
    stats = build_arpa(corpus, order=order, out_path=path)
    model = load(path)
    assert model.order == order
    assert stats["ngrams"][1] == stats["vocabulary"] + 3 == len(set(" ".join(corpus).split())) + 3
    vocabulary = sorted(set(" ".join(corpus).split())) + ["</s>", "<unk>"]
    for history in ([], ["w1"], ["w1", "w2"], ["w3", "w3", "Mr."], ["unseen", "w1"], ["w5", "unseen"], [","] * 4):
        total = sum(10 ** conditional(model, history, w) for w in vocabulary)
        assert total == pytest.approx(1.0, abs=1e-3), history


# Corpus "a b" / "b a b" / "a": bigrams (raw counts) <s> a 2, <s> b 1, a b 2, a </s> 1, b a 1,
# b </s> 2; unigram continuation counts a 2, b 2, </s> 2 (A = 6); vocabulary {a, b, </s>, <unk>}.
TINY = ["a b", "b a b", "a"]
# Fixed D = 0.5: unigram γ = 0.5·3/6 = 1/4, p(a) = 1.5/6 + γ/4 = 0.3125, p(<unk>) = γ/4 = 0.0625;
# every context has counts {2, 1} (A = 3, γ = 0.5·2/3 = 1/3): p = 1.5/3 + 0.3125/3 = 0.6041667
# for the count-2 word and 0.5/3 + 0.3125/3 = 0.2708333 for the count-1 word.
FIXED = {"a": (0.3125, 1 / 3), "b": (0.3125, 1 / 3), "</s>": (0.3125, 1.0), "<unk>": (0.0625, 1.0),
         "<s>": (None, 1 / 3), "<s> a": (0.6041667,), "<s> b": (0.2708333,), "a b": (0.6041667,),
         "a </s>": (0.2708333,), "b </s>": (0.6041667,), "b a": (0.2708333,)}
# Too few counts for modified KN: fallback D1 0.5, D2 1, D3+ 1.5. Unigrams (all count 2):
# γ = 1·3/6 = 1/2, p = 1/6 + γ/4 = 0.2916667, p(<unk>) = 0.125; contexts {2, 1}: γ = (1 + 0.5)/3
# = 1/2, p = 1/3 + 0.2916667/2 = 0.4791667 and 0.5/3 + 0.2916667/2 = 0.3125.
MODIFIED = {"a": (0.2916667, 0.5), "b": (0.2916667, 0.5), "</s>": (0.2916667, 1.0), "<unk>": (0.125, 1.0),
            "<s>": (None, 0.5), "<s> a": (0.4791667,), "<s> b": (0.3125,), "a b": (0.4791667,),
            "a </s>": (0.3125,), "b </s>": (0.4791667,), "b a": (0.3125,)}


@pytest.mark.parametrize("discount, expected", [(0.5, FIXED), (None, MODIFIED)])
def test_bigram_probabilities_by_hand(tmp_path, discount, expected):
    stats = build_arpa(TINY, order=2, out_path=tmp_path / "tiny.arpa", discount=discount)
    assert stats["ngrams"] == {1: 5, 2: 6}
    assert stats["discount_fallback"] == ([] if discount else [1, 2])
    entries = arpa_entries(tmp_path / "tiny.arpa")
    assert set(entries) == set(expected)
    for ngram, values in expected.items():
        got = [10 ** v for v in entries[ngram]]
        if values[0] is None:
            assert entries[ngram][0] == -99  # <s> is never predicted
            got, values = got[1:], values[1:]
        assert got == pytest.approx(values, abs=1e-6), ngram
    model = load(tmp_path / "tiny.arpa")
    assert 10 ** conditional(model, ["b"], "b") == pytest.approx(expected["b"][1] * expected["b"][0], abs=1e-6)


def test_modified_kn_discounts_from_counts_of_counts(tmp_path):
    """Single-word sentences repeated k times give bigram counts k for "<s> w" and "w </s>":
    10/5/3/2 words seen 1/2/3/4 times -> t1..t4 = 20, 10, 6, 4, Y = 1/2, D1 = 1 - 2·Y·10/20 = 0.5,
    D2 = 2 - 3·Y·6/10 = 1.1, D3+ = 3 - 4·Y·4/6 = 5/3."""
    sentences = [f"w{i}" for i in range(10)]
    sentences += [f"x{i}" for i in range(5)] * 2 + [f"y{i}" for i in range(3)] * 3 + [f"z{i}" for i in range(2)] * 4
    stats = build_arpa(sentences, order=2, out_path=tmp_path / "d.arpa")
    assert stats["discounts"][2] == pytest.approx((0.5, 1.1, 5 / 3))
    assert 2 not in stats["discount_fallback"]


def test_builder_refuses_bad_input(tmp_path):
    with pytest.raises(ValueError, match="no sentences"):
        build_arpa(["", "  "], out_path=tmp_path / "x.arpa")
    with pytest.raises(ValueError, match="reserved"):
        build_arpa(["a </s> b"], out_path=tmp_path / "x.arpa")
    with pytest.raises(ValueError, match="order"):
        build_arpa(["a b"], order=1, out_path=tmp_path / "x.arpa")
    with pytest.raises(ValueError, match="discount"):
        build_arpa(["a b"], out_path=tmp_path / "x.arpa", discount=1.5)
    with pytest.raises(TypeError, match="not one string"):
        build_arpa("a b", out_path=tmp_path / "x.arpa")
    assert list(tmp_path.iterdir()) == []


def test_read_text_corpus_normalises_whitespace(tmp_path):
    (tmp_path / "one.txt").write_text("\ufeff  The  quick\tbrown fox.\n\n   \nMr. Smith's ,\n", encoding="utf-8")
    (tmp_path / "two.txt").write_text("last line without newline", encoding="utf-8")
    assert list(read_text_corpus([tmp_path / "one.txt", str(tmp_path / "two.txt")])) == [
        "The quick brown fox.", "Mr. Smith's ,", "last line without newline"]


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    lm_command.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.run(args)


def test_cli_builds_a_model(tmp_path, capsys, corpus):
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(corpus) + "\n", encoding="utf-8")
    out = tmp_path / "model.arpa"
    assert run_cli(["lm", "build", "--text", str(text), str(text), "--order", "3", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "600 sentences" in printed and "3-grams" in printed
    assert load(out).order == 3


def test_cli_errors(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    assert run_cli(["lm", "build", "--text", str(empty), "--out", str(tmp_path / "m.arpa")]) == 2
    assert "no sentences" in capsys.readouterr().err
    assert run_cli(["lm", "build", "--text", str(tmp_path / "missing.txt")]) == 2
    assert "not found" in capsys.readouterr().err
    text = tmp_path / "text.txt"
    text.write_text("a b\n", encoding="utf-8")
    assert run_cli(["lm", "build", "--text", str(text), "--out", str(tmp_path / "no" / "m.arpa")]) == 2
    assert "No such file or directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # refused while parsing, before the text is read
        run_cli(["lm", "build", "--text", str(text), "--order", "1", "--out", str(tmp_path / "m.arpa")])
    assert exit_.value.code == 2
    assert "argument --order: expected an integer >= 2, got '1'" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.txt", "text.txt"]
    with pytest.raises(SystemExit):
        run_cli(["lm"])


def test_loading_an_arpa_file_prints_nothing(tmp_path, capfd, corpus):
    """KenLM's advice to build a binary file (written by its C++ code to the process's stderr) is
    not shown: the main job and every command loading an LM printed it on each load."""
    path = tmp_path / "lm.arpa"
    build_arpa(corpus, order=3, out_path=path)
    capfd.readouterr()
    model, words = load_arpa(path)
    assert model.order == 3 and words
    assert capfd.readouterr() == ("", "")
