"""CTC decoding: greedy and beam search against brute-force references, the word LM and the
vocabulary at work (models of tokens and of words as written, and the scores they add to a text
against KenLM's own sentence scores), characters pyctcdecode treats specially, and input errors."""

from __future__ import annotations

import collections
import itertools
import logging
import math
import string

import numpy as np
import pytest

from tfnhr.charset import UNKNOWN, Charset
from tfnhr.decoding import BeamSearchDecoder, GreedyDecoder, greedy_decode, greedy_decode_batch, log_softmax
from tfnhr.decoding.beam import OPEN_VOCABULARY_UNK_OFFSET
from tfnhr.lm import build_arpa, token_sentence
from tfnhr.lm.arpa import load_arpa

LETTERS = Charset("abcdefghijklmnopqrstuvwxyz .,")
CORPUS = ["the quick brown fox jumps over the lazy dog", "a quick brown dog", "the brown fox",
          "the lazy fox sleeps", "over the fox"]
EXHAUSTIVE = dict(beam_width=1000, token_min_logp=-math.inf, beam_prune_logp=-math.inf)


def written(text: str, charset: Charset = LETTERS, weak: dict[int, float] | None = None) -> np.ndarray:
    """Log-probability scores ``[2 len(text), C]`` that "write" ``text``: one column per character
    (probability 0.99, or ``weak[i]`` for character ``i``, the rest on the blank), then a blank column."""
    floor = 1e-9
    columns = []
    for i, index in enumerate(charset.encode(text)):
        p = np.full(charset.num_classes, floor)
        p[index] = (weak or {}).get(i, 0.99)
        p[0] = 1.0 - p[index] - floor * (charset.num_classes - 2)
        blank = np.full(charset.num_classes, floor)
        blank[0] = 1.0 - floor * (charset.num_classes - 1)
        columns += [p, blank]
    return np.log(np.array(columns, dtype=np.float32))


def naive_greedy(scores: np.ndarray, charset: Charset) -> str:
    """Best path by a per-column loop."""
    out, previous = [], None
    for column in scores:
        best = max(range(len(column)), key=lambda k: column[k])
        if best != previous and best != 0:
            out.append(charset.chars[best - 1])
        previous = best
    return "".join(out)


def labelling_probabilities(logp: np.ndarray, charset: Charset) -> dict[str, float]:
    """Probability of every text, by summing over all ``C**T`` paths (whitespace-normalised, as
    the beam search's texts are)."""
    totals: dict[str, float] = collections.defaultdict(float)
    for path in itertools.product(range(logp.shape[1]), repeat=len(logp)):
        collapsed = [k for i, k in enumerate(path) if k != 0 and (i == 0 or path[i - 1] != k)]
        text = " ".join(charset.decode(collapsed).split())
        totals[text] += math.exp(sum(float(logp[t, k]) for t, k in enumerate(path)))
    return totals


@pytest.fixture(scope="module")
def fox_lm(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("lm") / "fox.arpa"
    build_arpa(CORPUS * 3, order=3, out_path=path)
    return str(path)


def test_log_softmax_normalises_and_keeps_dtype():
    scores = np.array([[1000.0, 0.0, -5.0], [1.0, 2.0, 3.0]], dtype=np.float32)
    logp = log_softmax(scores)
    assert logp.dtype == np.float32
    np.testing.assert_allclose(np.exp(logp).sum(axis=-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(logp[1], scores[1] - np.log(np.exp(scores[1]).sum()), rtol=1e-6)


def test_greedy_matches_a_per_column_loop():
    rng = np.random.default_rng(0)
    charset = Charset("ab c", with_unknown=True)
    scores = [rng.normal(size=(t, charset.num_classes)).astype(np.float32) for t in (0, 1, 7, 40)]
    assert greedy_decode_batch(scores, charset) == [naive_greedy(s, charset) for s in scores]
    assert greedy_decode(written("aab a", charset), charset) == "aab a"


@pytest.mark.parametrize("seed", range(6))
def test_beam_finds_the_most_probable_text(seed):
    """Without LM, on tiny problems, the beam's text is the most probable one (all paths summed)."""
    rng = np.random.default_rng(seed)
    for _ in range(25):
        chars = "ab "[: rng.integers(1, 4)]
        charset = Charset(chars, with_unknown=False)
        logp = log_softmax(rng.normal(scale=2.0, size=(rng.integers(1, 6), charset.num_classes)).astype(np.float32))
        totals = labelling_probabilities(logp, charset)
        text = BeamSearchDecoder(charset, **EXHAUSTIVE).decode(logp)
        assert totals[text] == pytest.approx(max(totals.values()), rel=1e-5), (chars, logp, text)


def test_beam_beats_the_best_path():
    """Two columns at P(a) = 0.4: the best path is blank-blank (0.36), "a" has 0.64."""
    charset = Charset("a", with_unknown=False)
    scores = np.log(np.array([[0.6, 0.4], [0.6, 0.4]], dtype=np.float32))
    assert greedy_decode(scores, charset) == ""
    assert BeamSearchDecoder(charset).decode(scores) == "a"


def test_lm_fixes_a_misspelling(fox_lm):
    text = "the quick brown fox"
    scores = written(text, weak={text.index("own"): 0.3})  # the "o" of "brown": P 0.3 vs blank 0.7
    assert greedy_decode(scores, LETTERS) == "the quick brwn fox"
    assert BeamSearchDecoder(LETTERS).decode(scores) == "the quick brwn fox"
    decoder = BeamSearchDecoder(LETTERS, lm_path=fox_lm)
    assert decoder.decode_batch([scores, written("the lazy dog")]) == ["the quick brown fox", "the lazy dog"]
    # A clearly written unknown word stays (open vocabulary).
    assert decoder.decode(written("the zebra")) == "the zebra"


def test_lm_keeps_empty_output_possible(fox_lm):
    """All-blank scores with a faint "fox": empty text, with or without LM (pyctcdecode alone
    would score the empty hypothesis as an unknown word)."""
    scores = written("fox", weak={0: 0.2, 1: 0.2, 2: 0.2})
    assert BeamSearchDecoder(LETTERS).decode(scores) == ""
    assert BeamSearchDecoder(LETTERS, lm_path=fox_lm).decode(scores) == ""


def test_closed_vocabulary(fox_lm):
    text = "the quick brown fox"
    scores = written(text, weak={text.index("own"): 1e-6})  # "o" all but absent
    vocabulary = ["the", "quick", "brown", "fox"]
    wide = dict(token_min_logp=-30.0, beam_prune_logp=-30.0)
    assert BeamSearchDecoder(LETTERS, vocabulary=vocabulary, **wide).decode(scores) == "the quick brwn fox"
    assert BeamSearchDecoder(LETTERS, vocabulary=vocabulary, closed_vocabulary=True, **wide).decode(scores) == text
    assert BeamSearchDecoder(LETTERS, lm_path=fox_lm, closed_vocabulary=True, **wide).decode(scores) == text
    assert BeamSearchDecoder(LETTERS, vocabulary=vocabulary).decode(written("fox the")) == "fox the"


CASED = Charset(string.ascii_letters + " .,")
SENTENCES = ["the quick brown fox jumps", "a quick brown dog", "the brown fox, the lazy dog", "the lazy fox sleeps"]


@pytest.fixture(scope="module")
def cased_lms(tmp_path_factory) -> tuple[str, str]:
    """The same text ("The quick brown fox jumps.", ...) as an LM of tokens and as an LM of words
    as written ("The", "jumps.")."""
    folder = tmp_path_factory.mktemp("cased")
    text = [sentence.capitalize() + "." for sentence in SENTENCES] * 3
    build_arpa([token_sentence(line) for line in text], order=3, out_path=folder / "tokens.arpa")
    build_arpa(text, order=3, out_path=folder / "written.arpa")
    return str(folder / "tokens.arpa"), str(folder / "written.arpa")


def test_a_token_lm_knows_its_words_in_any_case_and_next_to_punctuation(cased_lms):
    tokens_lm, written_lm = cased_lms
    text = "Brown, quick fox."
    scores = written(text, CASED, weak={text.index("own"): 0.3})
    assert greedy_decode(scores, CASED) == "Brwn, quick fox."
    assert BeamSearchDecoder(CASED, lm_path=tokens_lm).decode(scores) == text  # case and marks as read
    # Words as written: "Brown," is as unknown as "Brwn,", and "fox." (the text has "fox" and
    # "fox,") loses its full stop.
    assert BeamSearchDecoder(CASED, lm_path=written_lm).decode(scores) == "Brwn, quick fox"


@pytest.mark.parametrize("alpha, beta", [(0.5, 1.0), (0.8, 2.5)])
def test_reading_scores_are_kenlms_sentence_scores_weighted(cased_lms, alpha, beta):
    """A model of tokens weighs readings by what the search added: KenLM's score of the sentence's
    tokens, unknown ones penalised, times alpha · ln 10, plus beta per word. Other decoders add nothing."""
    tokens_lm, written_lm = cased_lms
    texts = ["The brown fox, the lazy dog.", "A quick zebra", ""]
    tokens_model, _ = load_arpa(tokens_lm)
    by_kenlm = [tokens_model.score(token_sentence(text), bos=True, eos=True) for text in texts]
    unknown = [0, 1, 0]  # "zebra"
    words = [len(text.split()) for text in texts]
    expected = [alpha * math.log(10) * (log10_p + OPEN_VOCABULARY_UNK_OFFSET * u) + beta * n
                for log10_p, u, n in zip(by_kenlm, unknown, words)]
    decoder = BeamSearchDecoder(CASED, lm_path=tokens_lm, alpha=alpha, beta=beta)
    np.testing.assert_allclose(decoder.reading_scores(texts), expected, rtol=1e-5)
    for other in (BeamSearchDecoder(CASED, lm_path=written_lm, alpha=alpha, beta=beta), BeamSearchDecoder(CASED),
                  BeamSearchDecoder(CASED, vocabulary=["The", "brown"]), GreedyDecoder(CASED)):
        assert other.reading_scores(texts).tolist() == [0.0, 0.0, 0.0]


def test_unknown_symbol_is_decoded():
    charset = Charset("ab ", with_unknown=True)
    scores = written(f"a{UNKNOWN}b a", charset)
    assert greedy_decode(scores, charset) == f"a{UNKNOWN}b a"
    assert BeamSearchDecoder(charset).decode(scores) == f"a{UNKNOWN}b a"
    closed = BeamSearchDecoder(charset, vocabulary=[f"a{UNKNOWN}b", "a"], closed_vocabulary=True)
    assert closed.decode(scores) == f"a{UNKNOWN}b a"


def test_spaces_separate_words():
    """Beam text is whitespace-normalised; the best path keeps every space."""
    scores = written(" the  fox ")
    assert greedy_decode(scores, LETTERS) == " the  fox "
    assert BeamSearchDecoder(LETTERS).decode(scores) == "the fox"


@pytest.mark.parametrize("chars", ["a|\N{LOWER ONE EIGHTH BLOCK}\N{DOUBLE QUESTION MARK}_", "a| _<>"])
def test_characters_pyctcdecode_treats_specially_are_kept(chars):
    """pyctcdecode's alphabet builder would read "|" as a space (when there is none), any "▁" as
    BPE; "_", "⁇", "<", ">" are plain characters too."""
    charset = Charset(chars, with_unknown=True)
    text = chars[::-1] + "a"
    scores = written(text, charset)
    assert greedy_decode(scores, charset) == text
    assert BeamSearchDecoder(charset).decode(scores) == " ".join(text.split())


@pytest.mark.parametrize("shape", [(5,), (2, 5, 31), (5, 30), (5, 32)])
def test_wrong_shapes_are_refused(shape):
    scores = np.zeros(shape, dtype=np.float32)
    with pytest.raises(ValueError, match=r"\[T, 31\]"):
        greedy_decode(scores, LETTERS)
    with pytest.raises(ValueError, match=r"\[T, 31\]"):
        BeamSearchDecoder(LETTERS).decode(scores)


def test_empty_and_non_finite_scores():
    empty = np.zeros((0, LETTERS.num_classes), dtype=np.float32)
    assert greedy_decode(empty, LETTERS) == ""
    assert BeamSearchDecoder(LETTERS).decode(empty) == ""
    bad = written("ab")
    bad[1, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        BeamSearchDecoder(LETTERS).decode(bad)


def test_language_model_file_errors(tmp_path, fox_lm):
    with pytest.raises(FileNotFoundError, match="not found"):
        BeamSearchDecoder(LETTERS, lm_path=tmp_path / "missing.arpa")
    (tmp_path / "text.arpa").write_text("the quick brown fox\n")
    with pytest.raises(ValueError, match="not an ARPA file"):
        BeamSearchDecoder(LETTERS, lm_path=tmp_path / "text.arpa")
    broken = tmp_path / "broken.arpa"
    broken.write_text(open(fox_lm).read()[:200])
    with pytest.raises(ValueError, match="not a valid ARPA file"):
        BeamSearchDecoder(LETTERS, lm_path=broken)
    (tmp_path / "empty.arpa").write_text("")
    with pytest.raises(ValueError, match="not an ARPA file"):
        BeamSearchDecoder(LETTERS, lm_path=tmp_path / "empty.arpa")
    with pytest.raises(ValueError, match="closed_vocabulary needs"):
        BeamSearchDecoder(LETTERS, closed_vocabulary=True)
    with pytest.raises(ValueError, match="vocabulary is empty"):
        BeamSearchDecoder(LETTERS, vocabulary=[""])
    with pytest.raises(TypeError, match="not one string"):
        BeamSearchDecoder(LETTERS, vocabulary="fox")


def test_pyctcdecode_logs_only_real_problems(fox_lm, caplog):
    """Its "only N unigrams" warning (any vocabulary under 1000 words) is dropped; its warning
    about a vocabulary the LM hardly knows is kept."""
    with caplog.at_level(logging.INFO, logger="pyctcdecode"):
        BeamSearchDecoder(LETTERS, lm_path=fox_lm)
        assert caplog.records == []
        BeamSearchDecoder(LETTERS, lm_path=fox_lm, vocabulary=["zebra", "yak", "gnu", "emu", "ox", "cat",
                                                        "cow", "pig", "hen", "rat", "fox"])
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "found in kenlm model" in caplog.text


def test_vocabulary_outside_the_charset_warns():
    with pytest.warns(UserWarning, match="outside the charset"):
        BeamSearchDecoder(LETTERS, vocabulary=["The", "Fox", "dog"])


@pytest.mark.parametrize("lm, vocabulary", [(True, None), (False, ["the", "quick", "brwn", "dog"])])
def test_worker_processes_read_what_this_process_reads(fox_lm, lm, vocabulary):
    """Beam searches spread over 2 worker processes (each with its own copy of the decoder and its
    LM or vocabulary) give the texts of the same decoder in this process, in order; too few lines
    stay here; :meth:`close` stops the workers, and a later batch starts new ones."""
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(["the", "quick", "brown", "fox", "lazy", "dog", "zebra"], size=rng.integers(1, 5)))
             for _ in range(23)]
    scores = [written(text, weak={i: float(rng.uniform(0.2, 0.99)) for i in range(len(text))}) for text in texts]
    scores += [np.zeros((0, LETTERS.num_classes), np.float32)]
    lm_path = fox_lm if lm else None
    alone = BeamSearchDecoder(LETTERS, lm_path=lm_path, vocabulary=vocabulary).decode_batch(scores)
    pooled = BeamSearchDecoder(LETTERS, processes=2, lm_path=lm_path,  # a vocabulary read once, as an iterator
                               vocabulary=iter(vocabulary) if vocabulary else None)
    assert pooled.decode_batch(scores) == alone
    workers = list(pooled._pool._executor._processes.values())
    assert len(workers) == 2 and all(worker.is_alive() for worker in workers)
    assert pooled.decode_batch(scores[:3]) == alone[:3]  # fewer than 2 per process: decoded here
    pooled.close()
    for worker in workers:
        worker.join(timeout=10)
        assert not worker.is_alive()
    assert pooled.decode_batch(scores[::-1]) == alone[::-1]
    pooled.close()
    bad = [written("ab")] * 4
    bad[2] = bad[2].copy()
    bad[2][1, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):  # checked here, before any work is handed out
        BeamSearchDecoder(LETTERS, processes=2).decode_batch(bad)
    with pytest.raises(ValueError, match="processes must be >= 1"):
        BeamSearchDecoder(LETTERS, processes=0)
