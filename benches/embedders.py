"""Speed and separation of the embedders; prints one markdown table (or JSON).

Usage::

    .venv/bin/python benches/embedders.py            # all three embedders
    .venv/bin/python benches/embedders.py --no-local # skip the model (no `local` extra)
    .venv/bin/python benches/embedders.py --json

Speed: µs per text of about 200 characters, best of 3 runs.

- ``hash, known words``: 2,000 texts drawn from the ~190 English words of the sentences
  below — the steady state, where every word's features are already in HashEmbedder's
  per-token cache. The local and http rows embed these texts too (about 40 word pieces each).
- ``hash, new words``: 2,000 texts of random letter strings — every word is new, so each of
  its features is hashed with BLAKE3 (the worst case).
- ``local, batch 64`` / ``local, one text``: all-MiniLM-L6-v2 on the CPU, 256 texts in batches
  of 64 (indexing), and one text per call (a query).
- ``http client, batch 64``: HttpEmbedder against a fake server on 127.0.0.1 that answers
  instantly — the client's own cost (JSON, HTTP, normalisation), not a real model's.

Separation, on hand-made pairs in the vocabulary of agent memories: mean cosine of
paraphrase pairs, of unrelated pairs (every cross pair) and of hard negatives (pairs that
share words but not meaning), and the AUC of paraphrases against each (1.0 = every
paraphrase pair scores above every negative). Nothing here fails on timing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import string
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cortexgraph.embed import Embedder, HashEmbedder, HttpEmbedder, LocalEmbedder

PARAPHRASES = [
    ("The API is deployed by Argo CD", "Argo CD deploys the API"),
    (
        "Never run database migrations from CI",
        "Database migrations must not be run from the CI pipeline",
    ),
    ("The user prefers tabs over spaces", "User preference: tabs instead of spaces"),
    ("Tests are run with pytest in parallel", "We run the test suite in parallel using pytest"),
    ("The login page crashes on Safari", "Safari crashes when opening the login page"),
    (
        "Store secrets in the vault, not in env files",
        "Secrets belong in the vault rather than env files",
    ),
    (
        "The staging cluster runs Kubernetes 1.29",
        "Kubernetes version 1.29 is running on the staging cluster",
    ),
    ("Release notes are written in the changelog", "We write release notes in CHANGELOG"),
    (
        "The cache invalidation bug was fixed last week",
        "Last week we fixed the bug in cache invalidation",
    ),
    (
        "Use the retry decorator for flaky network calls",
        "Flaky network calls should use the retry decorator",
    ),
    ("Deployment happens every Friday", "We deploy on Fridays"),
    ("The configuration is loaded from YAML", "Config gets loaded from a yaml file"),
    ("Benchmarks showed indexing is slow", "Indexing was slow in the benchmark"),
    ("Alice owns the billing service", "The billing service is owned by Alice"),
    ("Logging uses structured JSON output", "Logs are emitted as structured JSON"),
    ("How do I reset my password?", "I forgot my login credentials"),
    ("The server ran out of memory", "The machine exhausted its RAM"),
]
HARD_NEGATIVES = [
    ("The API is deployed by Argo CD", "The API documentation is hosted on the wiki"),
    ("Never run database migrations from CI", "CI runs the unit tests on every push"),
    ("The user prefers tabs over spaces", "The user interface uses dark mode"),
    ("Tests are run with pytest in parallel", "Parallel builds are run with make -j"),
    ("The login page crashes on Safari", "The login page shows a captcha"),
    ("Store secrets in the vault, not in env files", "Env files list the feature flags"),
    ("The staging cluster runs Kubernetes 1.29", "The production cluster has 40 nodes"),
    ("Deployment happens every Friday", "Standup happens every morning"),
    ("Alice owns the billing service", "Bob owns the search service"),
    ("Logging uses structured JSON output", "The API returns JSON output"),
]


def texts_known_words(n: int, rng: random.Random) -> list[str]:
    """English words of the hand-made sentences below, shuffled into 200-character texts."""
    sentences = [t for pair in PARAPHRASES + HARD_NEGATIVES for t in pair]
    vocab = sorted({w.strip(".,:?").lower() for s in sentences for w in s.split()})
    return [_fill(lambda: rng.choice(vocab), 200) for _ in range(n)]


def texts_new_words(n: int, rng: random.Random) -> list[str]:
    def word() -> str:
        return "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 10)))

    return [_fill(word, 200) for _ in range(n)]


def _fill(word: Callable[[], str], length: int) -> str:
    out = ""
    while len(out) < length:
        out += word() + " "
    return out[:length]


def us_per_text(
    embed: Callable[[Sequence[str]], Any], texts: list[str], batch: int, repeats: int = 3
) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for i in range(0, len(texts), batch):
            embed(texts[i : i + batch])
        best = min(best, time.perf_counter() - started)
    return best / len(texts) * 1e6


def separation(emb: Embedder) -> dict[str, float]:
    def cos(a: str, b: str) -> float:
        va, vb = emb.embed([a, b])
        return float(va @ vb)

    para = [cos(a, b) for a, b in PARAPHRASES]
    texts = [t for pair in PARAPHRASES for t in pair]
    unrelated = [
        cos(texts[a], texts[b])
        for a, b in itertools.combinations(range(len(texts)), 2)
        if a // 2 != b // 2
    ]
    hard = [cos(a, b) for a, b in HARD_NEGATIVES]

    def auc(pos: list[float], neg: list[float]) -> float:
        wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
        return wins / (len(pos) * len(neg))

    return {
        "paraphrase": statistics.mean(para),
        "unrelated": statistics.mean(unrelated),
        "hard_negative": statistics.mean(hard),
        "auc_unrelated": auc(para, unrelated),
        "auc_hard": auc(para, hard),
    }


class _FakeOpenAI(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = [
            {"index": i, "embedding": [float(len(t) % 7 + 1)] + [0.5] * 383}
            for i, t in enumerate(body["input"])
        ]
        raw = json.dumps({"data": data}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-local", action="store_true", help="skip LocalEmbedder")
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    args = parser.parse_args()
    rng = random.Random(20260101)
    rows: list[dict[str, Any]] = []

    hashing = HashEmbedder()
    known, new = texts_known_words(2000, rng), texts_new_words(2000, rng)
    hashing.embed(known)  # fill the per-token cache: the steady state
    rows.append({"case": "hash, known words", "us_per_text": us_per_text(hashing.embed, known, 64)})
    rows.append(
        {"case": "hash, new words", "us_per_text": us_per_text(hashing.embed, new, 64, repeats=1)}
    )
    quality = {"hash-v1-384": separation(hashing)}

    if not args.no_local:
        print("loading all-MiniLM-L6-v2 ...", file=sys.stderr)
        started = time.perf_counter()
        local = LocalEmbedder()
        rows.append({"case": "local, load", "us_per_text": (time.perf_counter() - started) * 1e6})
        sample = known[:256]
        local.embed(sample[:64])  # warm-up
        rows.append(
            {"case": "local, batch 64", "us_per_text": us_per_text(local.embed, sample, 64)}
        )
        rows.append(
            {"case": "local, one text", "us_per_text": us_per_text(local.embed, sample[:32], 1)}
        )
        quality[local.name] = separation(local)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    with HttpEmbedder(f"http://127.0.0.1:{httpd.server_address[1]}", model="fake") as remote:
        remote.embed(known[:64])  # warm-up
        rows.append(
            {
                "case": "http client, batch 64",
                "us_per_text": us_per_text(remote.embed, known[:1024], 64),
            }
        )
    httpd.shutdown()
    httpd.server_close()

    if args.json:
        print(json.dumps({"speed": rows, "separation": quality}, indent=2))
        return
    print("| case | µs per text |\n| --- | ---: |")
    for row in rows:
        print(f"| {row['case']} | {row['us_per_text']:,.0f} |")
    print()
    print("| embedder | paraphrase | unrelated | hard negative | AUC unrelated | AUC hard |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, q in quality.items():
        print(
            f"| {name} | {q['paraphrase']:.3f} | {q['unrelated']:.3f} | "
            f"{q['hard_negative']:.3f} | {q['auc_unrelated']:.3f} | {q['auc_hard']:.3f} |"
        )


if __name__ == "__main__":
    main()
