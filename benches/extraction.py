"""Measure ``RuleExtractor`` on the labelled transcripts; print precision and recall.

Usage::

    .venv/bin/python benches/extraction.py [--data fixtures/extraction/labelled.jsonl]
                                           [--json] [--misses]

Each line of the data file is a snippet: ``turns`` (role, text), an optional ``context``
and the ``expected`` memories, each a ``type`` and a ``key`` (the words that make it).
A candidate matches an expected memory when their types are equal and every keyword
token of the key (the store's tokenizer: stemmed, stopwords removed) is among the
candidate's tokens (its text and path). Matching is one-to-one, in order. Precision is
matched candidates over all candidates; recall is matched expected memories over all
expected ones; both are also given per type. ``--misses`` lists what was missed and
what was proposed without a match. Nothing here fails: the target is precision >= 0.8.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cortexgraph.core.extraction import (
    Candidate,
    ExtractionContext,
    ExtractionInput,
    RuleExtractor,
    Turn,
)
from cortexgraph.core.text import tokenize

DATA = Path(__file__).resolve().parent.parent / "fixtures" / "extraction" / "labelled.jsonl"


def load(path: Path) -> list[dict[str, Any]]:
    """The snippets of a labelled JSON Lines file."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def snippet_input(snippet: dict[str, Any]) -> ExtractionInput:
    """A snippet's turns and context as an :class:`ExtractionInput`."""
    turns = [Turn(t["role"], t["text"]) for t in snippet["turns"]]
    return ExtractionInput(turns, ExtractionContext(**snippet.get("context", {})))


def _tokens(candidate: Candidate) -> set[str]:
    return set(tokenize(candidate.text + " " + (candidate.path or "")))


def match(
    expected: list[dict[str, str]], found: list[Candidate]
) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """``(pairs, missed, spurious)``: (expected index, candidate index) pairs matched
    one-to-one, the expected memories not found and the candidates that matched nothing."""
    used: set[int] = set()
    pairs = []
    missed = []
    for e, want in enumerate(expected):
        key = set(tokenize(want["key"]))
        for c, candidate in enumerate(found):
            if c not in used and candidate.type == want["type"] and key <= _tokens(candidate):
                used.add(c)
                pairs.append((e, c))
                break
        else:
            missed.append(e)
    return pairs, missed, [c for c in range(len(found)) if c not in used]


def _ratio(a: int, b: int) -> float:
    return a / b if b else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--misses", action="store_true")
    args = parser.parse_args()
    snippets = load(args.data)
    extractor = RuleExtractor()
    found_n = expected_n = matched = 0
    by_type: dict[str, Counter[str]] = {}
    notes = []
    started = time.perf_counter()
    for snippet in snippets:
        found = extractor.extract(snippet_input(snippet))
        pairs, missed, spurious = match(snippet["expected"], found)
        found_n += len(found)
        expected_n += len(snippet["expected"])
        matched += len(pairs)
        for want in snippet["expected"]:
            by_type.setdefault(want["type"], Counter())["expected"] += 1
        for candidate in found:
            by_type.setdefault(candidate.type, Counter())["found"] += 1
        for _, c in pairs:
            by_type[found[c].type]["matched"] += 1
        for e in missed:
            want = snippet["expected"][e]
            notes.append(f"{snippet['id']}: missed {want['type']} {want['key']!r}")
        for c in spurious:
            notes.append(f"{snippet['id']}: spurious {found[c].type} {found[c].text!r}")
    elapsed = time.perf_counter() - started
    result = {
        "snippets": len(snippets),
        "expected": expected_n,
        "candidates": found_n,
        "matched": matched,
        "precision": round(_ratio(matched, found_n), 3),
        "recall": round(_ratio(matched, expected_n), 3),
        "ms_per_snippet": round(elapsed * 1000 / max(len(snippets), 1), 3),
        "by_type": {
            name: {
                "expected": counts["expected"],
                "candidates": counts["found"],
                "precision": round(_ratio(counts["matched"], counts["found"]), 3),
                "recall": round(_ratio(counts["matched"], counts["expected"]), 3),
            }
            for name, counts in sorted(by_type.items())
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"RuleExtractor on {result['snippets']} snippets: {result['expected']} expected,"
            f" {result['candidates']} proposed, {result['matched']} matched"
        )
        print(f"precision {result['precision']:.3f}  recall {result['recall']:.3f}")
        print("| type | expected | proposed | precision | recall |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, row in result["by_type"].items():
            print(
                f"| {name} | {row['expected']} | {row['candidates']} |"
                f" {row['precision']:.2f} | {row['recall']:.2f} |"
            )
    if args.misses:
        print("\n".join(notes))


if __name__ == "__main__":
    main()
