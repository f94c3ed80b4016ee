"""LM tokens (lower case, punctuation apart), a language's word frequencies as the background of
the unigrams, and models built with them: normalised, each unseen word in proportion to its
frequency, against the interpolation computed by hand."""

from __future__ import annotations

import math

import kenlm
import pytest
import wordfreq

from tfnhr.config.choices import LM_BACKGROUND_LANGUAGES
from tfnhr.lm import background_frequencies, build_arpa, is_token_vocabulary, lm_tokens, token_sentence
from tfnhr.lm.kneser_ney import background_distribution
from tests.tfnhr.lm.test_kneser_ney import arpa_entries, conditional, load, run_cli


def test_tokens_are_lower_case_words_and_single_marks():
    assert lm_tokens('Eager, he said it\'s "late." (Über-cool) 3.5') == [
        "eager", ",", "he", "said", "it's", '"', "late", ".", '"', "(", "über", "-", "cool", ")", "3", ".", "5"]
    assert lm_tokens("  ") == [] and lm_tokens("'tis") == ["'", "tis"]
    assert token_sentence("The end.") == "the end ."
    assert is_token_vocabulary(["the", ".", "it's", "3"])
    assert not is_token_vocabulary(["the", "end."]) and not is_token_vocabulary(["The"])
    assert not is_token_vocabulary([])


def test_background_frequencies_are_wordfreqs_most_frequent_tokens():
    english = background_frequencies("en", 2000)
    assert 1900 <= len(english) <= 2000
    assert max(english, key=english.get) == "the"
    assert all(lm_tokens(word) == [word] for word in english)
    assert all(0 < frequency < 1 for frequency in english.values())
    assert english["house"] > english["hill"] > 0
    assert "haus" in background_frequencies("de", 2000)
    with pytest.raises(ValueError, match="no word frequencies for language 'xx'"):
        background_frequencies("xx")
    assert LM_BACKGROUND_LANGUAGES == tuple(sorted(wordfreq.available_languages()))
    with pytest.raises(ValueError, match="at least one word"):
        background_frequencies("en", 0)


def test_background_distribution_is_frequency_plus_the_rarest_frequency():
    words = ["<s>", "</s>", "<unk>", "a", "b", "c"]  # "c" only in the corpus
    base = background_distribution(words, {"a": 0.3, "b": 0.1, "d": 0.05})
    # weights: <s> 0, </s> 0.05, <unk> 0.05, a 0.35, b 0.15, c 0.05 (total 0.65)
    assert base == pytest.approx([0.0, 0.05 / 0.65, 0.05 / 0.65, 0.35 / 0.65, 0.15 / 0.65, 0.05 / 0.65])
    with pytest.raises(ValueError, match="no words"):
        background_distribution(words, {})
    with pytest.raises(ValueError, match="positive and finite"):
        background_distribution(words, {"a": 0.0})
    for odd in ("</s>", "a b", "", " a"):
        with pytest.raises(ValueError, match="single words"):
            background_distribution(words, {"a": 0.1, odd: 0.1})


# Corpus "a b" / "b a b" / "a" (as in test_kneser_ney: continuation counts a 2, b 2, </s> 2, A = 6;
# fixed D = 0.5: γ() = 1/4). Background a 0.2, b 0.1, c 0.4, d 0.1 (floor 0.1): weights </s> 0.1,
# <unk> 0.1, a 0.3, b 0.2, c 0.5, d 0.2 (total 1.4).
TINY = ["a b", "b a b", "a"]
BACKGROUND = {"a": 0.2, "b": 0.1, "c": 0.4, "d": 0.1}
BY_HAND = {"a": 1.5 / 6 + 0.25 * 0.3 / 1.4, "b": 1.5 / 6 + 0.25 * 0.2 / 1.4, "</s>": 1.5 / 6 + 0.25 * 0.1 / 1.4,
           "c": 0.25 * 0.5 / 1.4, "d": 0.25 * 0.2 / 1.4, "<unk>": 0.25 * 0.1 / 1.4}


def test_unigrams_interpolate_with_the_background_by_hand(tmp_path):
    path = tmp_path / "bg.arpa"
    stats = build_arpa(TINY, order=2, out_path=path, discount=0.5, background=BACKGROUND)
    assert stats["vocabulary"] == 2 and stats["background"] == 2  # c and d joined a and b
    entries = arpa_entries(path)
    for word, probability in BY_HAND.items():
        assert 10 ** entries[word][0] == pytest.approx(probability, rel=1e-6), word
    assert sum(BY_HAND.values()) == pytest.approx(1.0)
    # A bigram context backs off to the new unigrams: p(c | a) = γ(a) p(c), γ(a) = 0.5·2/3.
    model = load(path)
    assert 10 ** conditional(model, ["a"], "c") == pytest.approx(1 / 3 * BY_HAND["c"], rel=1e-5)


def test_a_model_with_a_background_is_normalised(tmp_path):
    corpus = [token_sentence(s) for s in ("The cat sat.", "A dog sat on the mat.", "The cat, the dog.")] * 5
    path = tmp_path / "lm.arpa"
    background = background_frequencies("en", 500)
    build_arpa(corpus, order=3, out_path=path, background=background)
    model = load(path)
    vocabulary = sorted(set(" ".join(corpus).split()) | set(background)) + ["</s>", "<unk>"]
    for history in ([], ["the"], ["the", "cat"], ["sat", "."], ["house"], ["unseen", "the"]):
        total = math.fsum(10 ** conditional(model, history, w) for w in vocabulary)
        assert total == pytest.approx(1.0, abs=1e-3), history
    # Two words the corpus lacks: in the ratio of their frequencies (each plus the floor).
    ratio = 10 ** (conditional(model, [], "house") - conditional(model, [], "water"))
    floor = min(background.values())
    assert ratio == pytest.approx((background["house"] + floor) / (background["water"] + floor), rel=1e-4)


def test_cli_builds_token_models_with_a_background_by_default(tmp_path, capsys):
    text = tmp_path / "corpus.txt"
    text.write_text("The cat sat.\nA dog sat on the mat.\n", encoding="utf-8")
    tokens, written = tmp_path / "tokens.arpa", tmp_path / "written.arpa"
    assert run_cli(["lm", "build", "--text", str(text), "--background-words", "300", "--out", str(tokens)]) == 0
    printed = capsys.readouterr().out
    assert "2 sentences, 11 tokens (lower-case words and punctuation marks), vocabulary 8 + " in printed
    words = set(arpa_entries(tokens)) - {"<s>", "</s>", "<unk>"}
    assert {"the", "cat", ".", "house"} <= {w for w in words if " " not in w}
    assert run_cli(["lm", "build", "--text", str(text), "--as-written", "--background", "none",
                    "--out", str(written)]) == 0
    assert "2 sentences, 9 tokens (words as written), vocabulary 9\n" in capsys.readouterr().out
    unigrams = {w for w in arpa_entries(written) if " " not in w} - {"<s>", "</s>", "<unk>"}
    assert unigrams == {"The", "cat", "sat.", "A", "dog", "sat", "on", "the", "mat."}
    with pytest.raises(SystemExit):  # refused while parsing
        run_cli(["lm", "build", "--text", str(text), "--background", "xx", "--out", str(tmp_path / "x.arpa")])
    assert "argument --background: invalid choice: 'xx'" in capsys.readouterr().err
    assert isinstance(load(tokens), kenlm.Model)
