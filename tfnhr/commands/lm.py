"""``tfnhr lm build``: estimate a word n-gram language model (ARPA) from text files, for decoding
with :class:`tfnhr.decoding.BeamSearchDecoder`."""

from __future__ import annotations

import argparse
from pathlib import Path

from tfnhr.commands.common import reports_errors
from tfnhr.config.options import DefaultsHelpFormatter
from tfnhr.config.choices import DEFAULT_BACKGROUND_WORDS, LM_BACKGROUND_LANGUAGES
from tfnhr.config.ranges import Range


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``lm`` (with its ``build`` sub-command) to the ``tfnhr`` sub-commands."""
    lm = commands.add_parser("lm", help="word n-gram language models for decoding",
                             description="Word n-gram language models for decoding.")
    actions = lm.add_subparsers(dest="lm_command", required=True)
    build = actions.add_parser(
        "build", help="estimate an ARPA model from text files",
        description="Estimate an interpolated modified Kneser-Ney word n-gram model and write it as "
                    "an ARPA file. The text is lower-cased and cut into words and punctuation marks "
                    "(the decoder then scores its words the same way); the words the text lacks get "
                    "the unigram probability it sets aside in proportion to their frequency in the "
                    "language (wordfreq's lists).",
        formatter_class=DefaultsHelpFormatter)
    build.add_argument("--text", nargs="+", required=True, type=Path, metavar="FILE",
                       help="UTF-8 text files, one sentence per line (empty lines are skipped)")
    build.add_argument("--order", type=Range(2, integer=True).type, default=3, help="n-gram order (at least 2)")
    build.add_argument("--out", type=Path, default=Path("lm.arpa"), help="the ARPA file to write")
    build.add_argument("--discount", type=Range(0, 1, low_open=True, high_open=True).type, default=None,
                       help="a fixed Kneser-Ney discount in (0, 1) instead of the modified KN "
                            "discounts D1, D2, D3+ estimated per order")
    build.add_argument("--as-written", action="store_true",
                       help="keep case and punctuation: words are the text's whitespace-separated words, "
                            "scored as the decoder reads them")
    build.add_argument("--background", default="en", choices=(*LM_BACKGROUND_LANGUAGES, "none"), metavar="LANG",
                       help="language whose word frequencies (wordfreq's) back the words the text lacks: "
                            f"{', '.join(LM_BACKGROUND_LANGUAGES)}; or 'none': a uniform distribution over the "
                            "text's own words")
    build.add_argument("--background-words", type=Range(1, integer=True).type, default=DEFAULT_BACKGROUND_WORDS,
                       metavar="N", help="the language's N most frequent words make the background")
    build.set_defaults(run=run)


@reports_errors("lm build", errors=(OSError, ValueError))  # unreadable text, unwritable --out, bad corpus
def run(args: argparse.Namespace) -> int:
    """Build the model; print its statistics and path. Returns the exit status."""
    from tfnhr.lm import background_frequencies, build_arpa, read_text_corpus, token_sentence

    missing = [str(p) for p in args.text if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"text file(s) not found: {', '.join(missing)}")
    background = None
    if args.background != "none":
        background = background_frequencies(args.background, args.background_words)
    sentences = read_text_corpus(args.text)
    if not args.as_written:
        sentences = map(token_sentence, sentences)
    stats = build_arpa(sentences, order=args.order, out_path=args.out, discount=args.discount, background=background)
    tokens = "words as written" if args.as_written else "lower-case words and punctuation marks"
    print(f"{stats['sentences']} sentences, {stats['tokens']} tokens ({tokens}), vocabulary {stats['vocabulary']}"
          + (f" + {stats['background']} words of the {args.background!r} background" if background else ""))
    for n, count in stats["ngrams"].items():
        d1, d2, d3 = stats["discounts"][n]
        note = " (fallback: too few counts to estimate)" if n in stats["discount_fallback"] else ""
        print(f"  {n}-grams: {count:>10}   discounts D1 {d1:.3f}  D2 {d2:.3f}  D3+ {d3:.3f}{note}")
    print(f"wrote {stats['path']}")
    return 0
