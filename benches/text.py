"""Time the keyword-recall tokenizer (``cortexgraph.core.text``); print µs per call.

Usage::

    .venv/bin/python benches/text.py [--repeat 7] [--number 20000]

Cases: a 200-character English sentence (ASCII fast path) with the word memo warm, the
same with the memo cleared before every call (every word stemmed afresh), the sentence
with an accented letter (the Unicode path: NFKC, casefolding, a Unicode regex), and a
200-character Chinese and Japanese text. The best of ``--repeat`` runs is reported.
Nothing here fails on timing; the target for the first case is 15 µs.
"""

from __future__ import annotations

import argparse
import timeit

from cortexgraph.core import text

SENTENCE = (
    "Caroline said that she went to the LGBTQ support group last Tuesday, and it was "
    "really powerful; the stories people shared helped her feel accepted. She plans to "
    "go again next week with Mel, maybe...!"
)
assert len(SENTENCE) == 200, len(SENTENCE)
UNICODE_SENTENCE = SENTENCE.replace("group", "caf\u00e9")[:200]
CJK = ("東京タワーに行きました。我爱北京天安门。" * 10)[:200]


def _cold() -> None:
    for memo in text._MEMOS.values():
        memo.clear()
    text.stem_word.cache_clear()
    text.tokenize(SENTENCE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=20_000)
    args = parser.parse_args()
    cases = [
        ("tokenize, 200 ASCII chars, warm memo", lambda: text.tokenize(SENTENCE)),
        ("tokenize, 200 ASCII chars, cold memo", _cold),
        ("tokenize, 200 chars, Unicode path", lambda: text.tokenize(UNICODE_SENTENCE)),
        ("tokenize, 200 CJK chars", lambda: text.tokenize(CJK)),
        ("term_counts, 200 ASCII chars", lambda: text.term_counts(SENTENCE)),
    ]
    print("| case | µs per call |")
    print("| --- | ---: |")
    for name, call in cases:
        call()
        number = args.number if "cold" not in name else max(args.number // 20, 1)
        best = min(timeit.repeat(call, number=number, repeat=args.repeat)) / number
        print(f"| {name} | {best * 1e6:.2f} |")


if __name__ == "__main__":
    main()
