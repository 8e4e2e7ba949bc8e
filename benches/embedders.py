"""The embedders side by side in one run: the ONNX default against torch; print tables.

Usage (``benches/run.py --suite embedders`` runs the same measurements)::

    .venv/bin/python benches/embedders.py --data locomo_dev5.json
    .venv/bin/python benches/embedders.py --no-torch --json   # without the torch side
    .venv/bin/python benches/embedders.py --dir /mnt/ssd/tmp  # where the CLI's store lives

The model embedders are :class:`~cortexgraph.embed.LocalEmbedder` (all-MiniLM-L6-v2 on
ONNX Runtime, the default), :class:`~cortexgraph.embed.TorchEmbedder` (the same weights on
torch, the baseline every ratio is taken against) and, when ``cortexgraph.embed`` has it,
``StaticEmbedder`` (a model2vec model distilled from the same MiniLM). One that cannot be
made (its class or its extra is missing) is left out, and the output says so; without
torch (``--no-torch``, or torch not importable) the ratios are ``-``. The texts are
LoCoMo dialogue turns (the ``text`` of each turn of each ``session_N`` of each
conversation, in order; the file comes from ``--data`` or ``CORTEXGRAPH_LOCOMO``: its
licence keeps it out of the repository).

- **Throughput:** the first 2,000 turns, embedded by each model at 1 and 2 threads (each
  embedder's own ``threads``), in calls of 256 texts (what back-fill and catch-up hand an
  embedder). The embedders take turns call by call, so load on the machine falls on each
  alike; texts/s is 2,000 over the seconds of an embedder's calls. Target for the default:
  >= 1.2x torch at the same thread count.
- **Model load:** ``from cortexgraph.embed import X; X()`` timed inside a fresh Python
  process (so no module is imported yet), median of 3, the embedders taking turns. Target:
  <= 0.5 s.
- **Query embedding:** one text per call, at 1 and 2 threads, the embedders taking turns in
  blocks of 20 calls; p50 and p95. Twice: on 200 of LoCoMo's questions (what a query is:
  13 word pieces at the median), with the target p50 <= 5 ms at the default 1 thread; and on
  200 dialogue turns (longer: 30 word pieces at the median), for texts the size of a memory.
- **The CLI:** a store of the first conversation written with LocalEmbedder, its vectors
  cached by ``backfill_embeddings``; then ``cortexgraph recall QUESTION --mode hybrid``
  (the console script next to this Python, else ``python -m cortexgraph.cli``) run 20
  times as a whole process, each with another of the conversation's questions; p50 and p95
  of the wall time from spawning to exit. Target: p95 <= 1 s. One more run, untimed, under
  ``python -X importtime`` says whether the CLI imported torch.
- **Separation**, on hand-made pairs in the vocabulary of agent memories, for every
  embedder: the mean cosine of paraphrase pairs, of unrelated pairs (every cross pair) and
  of hard negatives (pairs that share words but not meaning), and the AUC of paraphrases
  against each (1.0 = every paraphrase pair scores above every negative).
- **Cheap embedders**, µs per text of about 200 characters, best of 3: ``hash, known
  words`` (2,000 texts of the ~190 English words of the sentences below, the steady state
  where every word's features sit in HashEmbedder's per-token cache); ``hash, new words``
  (random letter strings: every feature hashed with BLAKE3, the worst case); ``http
  client, batch 64`` (HttpEmbedder against a fake server on 127.0.0.1 that answers at once:
  the client's own cost, not a model's).

Progress goes to stderr; the tables (or JSON with ``--json``) to stdout. Nothing here fails
on timing: a missed target is reported as ``no``.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import os
import random
import statistics
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import cortexgraph.embed
import locomo
from _report import (
    TimedEmbedder,
    environment,
    markdown_table,
    percentile,
    progress,
    torch_available,
)
from cortexgraph import MissingExtraError
from cortexgraph.embed import Embedder, HashEmbedder, HttpEmbedder, LocalEmbedder
from cortexgraph.vector.state import EMBED_BATCH

#: ``key -> class name in cortexgraph.embed``: the model embedders, the default first
MODELS = {"local": "LocalEmbedder", "torch": "TorchEmbedder", "static": "StaticEmbedder"}
TURNS = 2_000
THREADS = (1, 2)
QUERIES = 200
QUERY_BLOCK = 20
LOAD_REPEATS = 3
CLI_RUNS = 20

TARGET_RATIO = 1.2  # default's texts/s over torch's, at least
TARGET_LOAD_S = 0.5
TARGET_QUERY_P50_MS = 5.0
TARGET_CLI_P95_MS = 1_000.0

_clock = time.perf_counter

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


# -- the model embedders --------------------------------------------------------------------


def model_classes(*, torch: bool) -> tuple[dict[str, type], dict[str, str]]:
    """The model embedder classes this run measures (key -> class) and, for each one left
    out, why."""
    classes: dict[str, type] = {}
    notes: dict[str, str] = {}
    for key, name in MODELS.items():
        cls = getattr(cortexgraph.embed, name, None)
        if key == "torch" and not torch:
            notes[key] = f"{name} left out (--no-torch, or torch is not importable)"
        elif cls is None:
            notes[key] = f"{name} left out: this cortexgraph.embed has no {name}"
        else:
            classes[key] = cls
    return classes, notes


def make(cls: type, threads: int) -> Embedder:
    """``cls(threads=threads)``, or ``cls()`` for an embedder without a thread setting."""
    if "threads" in inspect.signature(cls).parameters:
        return cls(threads=threads)  # type: ignore[no-any-return]
    return cls()  # type: ignore[no-any-return]


def make_all(classes: dict[str, type], notes: dict[str, str], threads: int) -> dict[str, Embedder]:
    """One instance of each class at ``threads``; a class whose extra is missing is dropped
    from ``classes`` with a note."""
    models: dict[str, Embedder] = {}
    for key, cls in list(classes.items()):
        progress(f"embedders: loading {cls.__name__}, {threads_label(threads)}")
        try:
            models[key] = make(cls, threads)
        except MissingExtraError as exc:
            notes[key] = f"{cls.__name__} left out: {exc}"
            del classes[key]
    return models


def threads_label(threads: int) -> str:
    return f"{threads} thread" if threads == 1 else f"{threads} threads"


def turns_first(keys: Sequence[str], turn: int) -> list[str]:
    """``keys`` rotated by ``turn``: who goes first changes from one turn to the next."""
    shift = turn % len(keys)
    return [*keys[shift:], *keys[:shift]]


def texts_per_second(models: dict[str, Embedder], texts: Sequence[str]) -> dict[str, float]:
    """Each model's texts/s over ``texts`` in calls of :data:`EMBED_BATCH`, taking turns
    call by call."""
    spent = dict.fromkeys(models, 0.0)
    for turn, start in enumerate(range(0, len(texts), EMBED_BATCH)):
        chunk = texts[start : start + EMBED_BATCH]
        for key in turns_first(list(models), turn):
            began = _clock()
            models[key].embed(chunk)
            spent[key] += _clock() - began
    return {key: len(texts) / seconds for key, seconds in spent.items()}


def query_ms(models: dict[str, Embedder], texts: Sequence[str]) -> dict[str, list[float]]:
    """Milliseconds of each one-text call per model, taking turns in blocks of
    :data:`QUERY_BLOCK` calls (so that one runtime's idle threads do not spin inside the
    other's call, while load still falls on both alike)."""
    out: dict[str, list[float]] = {key: [] for key in models}
    for turn, start in enumerate(range(0, len(texts), QUERY_BLOCK)):
        for key in turns_first(list(models), turn):
            for text in texts[start : start + QUERY_BLOCK]:
                began = _clock()
                models[key].embed([text])
                out[key].append((_clock() - began) * 1e3)
    return out


LOAD_SCRIPT = """\
import time
started = time.perf_counter()
from cortexgraph.embed import {name}
{name}()
print(time.perf_counter() - started)
"""


def load_seconds(classes: dict[str, type]) -> dict[str, list[float]]:
    """Seconds of import + construction of each class in fresh processes, taking turns."""
    out: dict[str, list[float]] = {key: [] for key in classes}
    for repeat in range(LOAD_REPEATS):
        for key in turns_first(list(classes), repeat):
            name = classes[key].__name__
            progress(f"embedders: model load {repeat + 1}/{LOAD_REPEATS}, {name}")
            run = subprocess.run(
                [sys.executable, "-c", LOAD_SCRIPT.format(name=name)],
                capture_output=True,
                text=True,
                check=False,
            )
            if run.returncode != 0:
                raise RuntimeError(f"loading {name} in a fresh process failed:\n{run.stderr}")
            out[key].append(float(run.stdout.split()[-1]))
    return out


# -- the CLI --------------------------------------------------------------------------------


def cli_command() -> list[str]:
    """How the ``cortexgraph`` command runs here: the console script installed next to
    this Python, or ``python -m cortexgraph.cli`` when there is none."""
    script = Path(sys.executable).with_name("cortexgraph")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "cortexgraph.cli"]


def cli_imports(command: list[str], args: list[str]) -> dict[str, Any]:
    """Run the command once under ``python -X importtime``: which heavy modules it
    imports, and the milliseconds of all its imports (``-X importtime`` adds its own)."""
    if command[0] != sys.executable:
        command = [sys.executable, *command]
    run = subprocess.run(
        [command[0], "-X", "importtime", *command[1:], *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        raise RuntimeError(f"cortexgraph recall under -X importtime failed:\n{run.stderr}")
    cumulative: dict[str, float] = {}
    total_us = 0
    for line in run.stderr.splitlines():
        fields = [f.strip() for f in line.removeprefix("import time:").split("|")]
        if not line.startswith("import time:") or not fields[0].isdigit():
            continue  # the header, or a line the command itself printed
        total_us += int(fields[0])
        if "." not in fields[2]:
            cumulative[fields[2]] = int(fields[1]) / 1e3
    watched = ("torch", "sentence_transformers", "transformers", "onnxruntime", "tokenizers")
    return {
        "imported": {name: name in cumulative for name in watched},
        "cumulative_ms": {name: cumulative[name] for name in watched if name in cumulative},
        "imports_ms": total_us / 1e3,
    }


def cli_recall(data: Path, root: Path) -> dict[str, Any]:
    """Build a store of the first conversation with LocalEmbedder, cache its vectors, then
    time ``cortexgraph recall --mode hybrid`` as a whole process :data:`CLI_RUNS` times."""
    conv = locomo.load(data)[0]
    questions = [q["question"] for q in conv["questions"][:CLI_RUNS]]
    progress(f"embedders: the CLI's store: {conv['id']}, {len(conv['turns'])} turns")
    embedder = TimedEmbedder(LocalEmbedder())
    cx, _, write_s = locomo.index_conversation(root, conv, embedder)
    try:
        embedded = cx.backfill_embeddings()
    finally:
        cx.close()
    command = cli_command()
    actor = locomo.actor_name(conv["id"])

    def args(question: str) -> list[str]:
        return ["recall", question, "--mode", "hybrid", "--root", str(root), "--actor", actor]

    imports = cli_imports(command, args(questions[0]))
    wall_ms: list[float] = []
    hits: list[int] = []
    progress(f"embedders: {' '.join(command)} recall --mode hybrid, {len(questions)} runs")
    for question in questions:
        began = _clock()
        run = subprocess.run(
            [*command, *args(question), "--json"], capture_output=True, text=True, check=False
        )
        wall_ms.append((_clock() - began) * 1e3)
        if run.returncode != 0 or run.stderr:
            raise RuntimeError(f"cortexgraph recall {question!r}:\n{run.stderr}")
        hits.append(len(json.loads(run.stdout)["hits"]))
    return {
        "command": " ".join(command),
        "conversation": conv["id"],
        "turns": len(conv["turns"]),
        "write_s": write_s,
        "backfill_embedded": embedded,
        "backfill_embed_s": embedder.seconds,
        "wall_ms": wall_ms,
        "hits": hits,
        "imports": imports,
    }


# -- the cheap embedders ----------------------------------------------------------------------


def cheap_rows(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """µs per text of HashEmbedder and of HttpEmbedder's client; HashEmbedder's
    separation."""
    rows: list[dict[str, Any]] = []
    hashing = HashEmbedder()
    known, new = texts_known_words(2000, rng), texts_new_words(2000, rng)
    hashing.embed(known)  # fill the per-token cache: the steady state
    rows.append({"case": "hash, known words", "us_per_text": us_per_text(hashing.embed, known, 64)})
    rows.append(
        {"case": "hash, new words", "us_per_text": us_per_text(hashing.embed, new, 64, repeats=1)}
    )
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with HttpEmbedder(f"http://127.0.0.1:{httpd.server_address[1]}", model="fake") as remote:
            remote.embed(known[:64])  # warm-up
            rows.append(
                {
                    "case": "http client, batch 64",
                    "us_per_text": us_per_text(remote.embed, known[:1024], 64),
                }
            )
    finally:
        httpd.shutdown()
        httpd.server_close()
    return rows, separation(hashing)


# -- the run ----------------------------------------------------------------------------------


def measure(data: Path, root: Path, *, torch: bool) -> dict[str, Any]:
    """Every figure of the bench, as plain data (see :func:`format_report`)."""
    texts = locomo.turn_texts(data)
    if len(texts) < TURNS:
        raise ValueError(f"{data} has {len(texts):,} dialogue turns, fewer than {TURNS:,}")
    turns = texts[:TURNS]
    samples = {"questions": locomo.question_texts(data)[:QUERIES], "turns": texts[:QUERIES]}
    classes, notes = model_classes(torch=torch)
    throughput: dict[str, dict[str, float]] = {}
    queries_ms: dict[str, dict[str, list[float]]] = {}
    quality: dict[str, dict[str, float]] = {}
    names: dict[str, str] = {}
    for threads in THREADS:
        models = make_all(classes, notes, threads)
        for model in models.values():
            model.embed(turns[:64])  # warm-up
        progress(f"embedders: {TURNS:,} turns, {threads_label(threads)}, {', '.join(models)}")
        throughput[str(threads)] = texts_per_second(models, turns)
        for kind, queries in samples.items():
            progress(f"embedders: query embedding, {kind}, {threads_label(threads)}")
            queries_ms[f"{kind}/{threads}"] = query_ms(models, queries)
        if threads == 1:
            names = {key: model.name for key, model in models.items()}
            quality.update({model.name: separation(model) for model in models.values()})
        del models
    load_s = load_seconds(classes)
    cli = cli_recall(data, root) if "local" in classes else None
    if cli is None:
        notes["cli"] = "the CLI's store needs LocalEmbedder: not measured"
    progress("embedders: hash and http")
    cheap, hash_quality = cheap_rows(random.Random(20260101))
    return {
        "classes": {key: cls.__name__ for key, cls in classes.items()},
        "names": names,
        "notes": notes,
        "throughput": throughput,
        "query_ms": queries_ms,
        "load_s": load_s,
        "cli": cli,
        "separation": {HashEmbedder().name: hash_quality, **quality},
        "cheap": cheap,
    }


# -- report -----------------------------------------------------------------------------------


def target_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary table's rows: each figure per model, the default's over torch's, and
    the default's target."""
    rows: list[dict[str, Any]] = []

    def add(
        measure: str,
        unit: str,
        figures: dict[str, float],
        target: str = "",
        check: Callable[[float, float | None], bool | None] | None = None,
    ) -> None:
        ratio = (
            figures["local"] / figures["torch"] if {"local", "torch"} <= figures.keys() else None
        )
        met = check(figures["local"], ratio) if check and "local" in figures else None
        rows.append(
            {
                "measure": measure,
                "unit": unit,
                "figures": figures,
                "default_over_torch": ratio,
                "target": target,
                "met": met,
            }
        )

    for threads in THREADS:
        add(
            f"throughput, {TURNS:,} turns in calls of {EMBED_BATCH}, {threads_label(threads)}",
            "texts/s",
            result["throughput"][str(threads)],
            f">= {TARGET_RATIO}x torch",
            lambda _, ratio: None if ratio is None else ratio >= TARGET_RATIO,
        )
    add(
        f"model load: import + construction, fresh process (median of {LOAD_REPEATS})",
        "s",
        {key: statistics.median(values) for key, values in result["load_s"].items()},
        f"<= {TARGET_LOAD_S} s",
        lambda figure, _: figure <= TARGET_LOAD_S,
    )
    for kind, threads in itertools.product(("questions", "turns"), THREADS):
        times = result["query_ms"][f"{kind}/{threads}"]
        for p in (50, 95):
            on_target = kind == "questions" and threads == 1 and p == 50
            add(
                f"query embedding p{p}, one text per call ({QUERIES} {kind}),"
                f" {threads_label(threads)}",
                "ms",
                {key: percentile(values, p) for key, values in times.items()},
                f"<= {TARGET_QUERY_P50_MS:g} ms" if on_target else "",
                (lambda figure, _: figure <= TARGET_QUERY_P50_MS) if on_target else None,
            )
    cli = result["cli"]
    if cli is not None:
        for p in (50, 95):
            add(
                f"`cortexgraph recall --mode hybrid`, whole process, p{p} of {CLI_RUNS}",
                "ms",
                {"local": percentile(cli["wall_ms"], p)},
                f"<= {TARGET_CLI_P95_MS:,.0f} ms" if p == 95 else "",
                (lambda figure, _: figure <= TARGET_CLI_P95_MS) if p == 95 else None,
            )
    return rows


def _number(value: float, unit: str) -> str:
    if unit == "texts/s":
        return f"{value:,.0f}"
    return f"{value:.2f}" if unit == "s" or value < 100 else f"{value:,.0f}"


def format_report(result: dict[str, Any]) -> str:
    classes, names = result["classes"], result["names"]
    lines = [f"embedders: {', '.join(f'{c} ({names[k]})' for k, c in classes.items())}"]
    lines += [f"  {note}" for note in result["notes"].values()]
    header = [
        "measure",
        "unit",
        *(f"{c} (default)" if k == "local" else c for k, c in classes.items()),
        "default / torch",
        "target (default)",
        "met",
    ]
    cells = [
        [
            row["measure"],
            row["unit"],
            *(
                _number(row["figures"][key], row["unit"]) if key in row["figures"] else "-"
                for key in classes
            ),
            "-" if row["default_over_torch"] is None else f"{row['default_over_torch']:.2f}x",
            row["target"] or "-",
            "-" if row["met"] is None else ("yes" if row["met"] else "no"),
        ]
        for row in target_rows(result)
    ]
    lines += ["", markdown_table(header, cells, set(range(2, 3 + len(classes))))]
    cli = result["cli"]
    if cli is not None:
        imports = cli["imports"]
        imported = ", ".join(
            f"{name} {'yes' if found else 'no'}" for name, found in imports["imported"].items()
        )
        ort_ms = imports["cumulative_ms"].get("onnxruntime")
        low, high = min(cli["hits"]), max(cli["hits"])
        hits = f"{low}" if low == high else f"{low}-{high}"
        lines += [
            "",
            f"The CLI: `{cli['command']} recall QUESTION --mode hybrid --json` on a store of"
            f" {cli['conversation']} ({cli['turns']} turns, written in {cli['write_s']:.2f} s,"
            f" {cli['backfill_embedded']} texts embedded by backfill_embeddings in"
            f" {cli['backfill_embed_s']:.1f} s); {hits} hits a run. One run under"
            f" -X importtime imported: {imported}; all imports"
            f" {imports['imports_ms']:.0f} ms"
            + ("" if ort_ms is None else f", onnxruntime's {ort_ms:.0f} ms of them")
            + ".",
        ]
    lines += [
        "",
        "| embedder | paraphrase | unrelated | hard negative | AUC unrelated | AUC hard |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, q in result["separation"].items():
        lines.append(
            f"| {name} | {q['paraphrase']:.3f} | {q['unrelated']:.3f} | "
            f"{q['hard_negative']:.3f} | {q['auc_unrelated']:.3f} | {q['auc_hard']:.3f} |"
        )
    lines += ["", "| cheap embedders | µs per text |", "| --- | ---: |"]
    lines += [f"| {row['case']} | {row['us_per_text']:,.0f} |" for row in result["cheap"]]
    return "\n".join(lines)


def json_result(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with the summary rows, and the query and CLI times as percentiles."""
    out = {**result, "rows": target_rows(result)}
    out["query_ms"] = {
        threads: {
            key: {"p50": percentile(values, 50), "p95": percentile(values, 95)}
            for key, values in times.items()
        }
        for threads, times in result["query_ms"].items()
    }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA, help="locomo_dev5.json")
    parser.add_argument("--no-torch", action="store_true", help="leave TorchEmbedder out")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument(
        "--dir", type=Path, default=None, help="parent of the CLI's store (default: TMPDIR)"
    )
    args = parser.parse_args(argv)
    locomo.require_data(parser, args.data)
    torch = not args.no_torch and torch_available()
    if not args.no_torch and not torch:
        progress("embedders: torch is not importable: the torch side is left out")
    with tempfile.TemporaryDirectory(prefix="cortexgraph-embedders-", dir=args.dir) as tmp:
        info = environment(0, Path(tmp))
        result = measure(args.data, Path(tmp), torch=torch)
    info["load_avg_1min_end"] = round(os.getloadavg()[0], 2)
    progress("embedders: done")
    if args.json:
        print(json.dumps({"environment": info, **json_result(result)}, indent=2))
        return 0
    print(
        f"cortexgraph {info['cortexgraph']}, Python {info['python']}, {info['cpus']} CPUs,"
        f" {info['platform']}\n1-min load average {info['load_avg_1min_start']} at start,"
        f" {info['load_avg_1min_end']} at end"
    )
    print()
    print(format_report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
