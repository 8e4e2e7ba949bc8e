"""Evidence recall of ``Cortex.recall`` on the LoCoMo development split; print tables.

Usage (``benches/run.py --suite locomo`` runs the same measurements)::

    .venv/bin/python benches/locomo.py
    .venv/bin/python benches/locomo.py --n 2 --json        # the first two conversations
    .venv/bin/python benches/locomo.py --embedders local   # the default embedder only
    .venv/bin/python benches/locomo.py --data PATH --dir /mnt/ssd/tmp

The targets: hybrid evidence recall@10 >= 0.65; the default embedder's hybrid recall@10
within 0.01 of the torch model's, in the same run; and recall@10 of the HNSW search against
exact search over the same stored vectors >= 0.95. Each conversation of
``locomo_dev5.json`` (its licence keeps it out of the repository: pass its path with
``--data`` or the environment variable ``CORTEXGRAPH_LOCOMO``) becomes one store: every
dialogue turn is an :class:`~cortexgraph.Event` with the turn's ``speaker``, its ``text``
(plus ``" [shares <blip_caption>]"`` for an image turn) and ``occurred_at`` = the session's
date-time as UTC milliseconds, written in namespace ``locomo``; each turn gets a
``relates_to`` edge to the previous turn of its session (what hybrid recall's graph
expansion follows).

The vector channel runs all-MiniLM-L6-v2, once per embedder of ``--embedders``, each on
stores of its own: ``local`` is :class:`~cortexgraph.LocalEmbedder` (the default, on ONNX
Runtime) and ``torch`` is :class:`~cortexgraph.TorchEmbedder` (the same weights on torch,
the reference). Both are measured by default when torch can be imported. ``--threads`` is
each embedder's own thread setting (ONNX Runtime's intra-op threads for the one, torch's
during ``embed`` for the other), so nothing here changes torch's process-wide setting.

Every question of categories 1-4 is asked of its own conversation with
``cx.recall(question, k=20, mode=...)`` in keyword, vector and hybrid mode (default
``fusion="score"``), and hybrid with ``fusion="rrf"`` as a reference. The score is evidence
recall@k = |evidence ∩ top k| / |evidence|, averaged over questions, with the evidence
cleaned as the dataset's README says (see :func:`clean_evidence`): 760 questions. Keyword
recall does not use the embedder, so its rows are the same for every embedder.

Also printed, per embedder: indexing time (the writes; the embedding and the HNSW build,
which happen on the first vector recall), per-query latency p50/p95 per mode (the whole
``recall`` call, and the query-embedding time within it), and the recall@10 of the HNSW
search against exact search over the same stored vectors, for every question (target
>= 0.95); and how many questions' hybrid recall@10 differs between the two embedders.

Progress goes to stderr; the tables (or JSON with ``--json``) to stdout. Nothing here fails
on a figure: a missed target is reported as ``no``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

import cortexgraph as cg
from _report import (
    TimedEmbedder,
    environment,
    markdown_table,
    percentile,
    progress,
    torch_available,
)
from cortexgraph.embed import Embedder, HashEmbedder, LocalEmbedder, StaticEmbedder, TorchEmbedder

REPO = Path(__file__).resolve().parent.parent
#: where the LoCoMo development split is (``--data`` overrides; empty: not given)
DEFAULT_DATA = Path(os.environ.get("CORTEXGRAPH_LOCOMO", ""))
NS = "locomo"
K = 20
KS = (5, 10, 20)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
#: (row label, recall mode, fusion)
RUNS = (
    ("keyword", "keyword", "score"),
    ("vector", "vector", "score"),
    ("hybrid", "hybrid", "score"),
    ("hybrid (rrf)", "hybrid", "rrf"),
)
TARGET_HYBRID_R10 = 0.65
TARGET_HNSW_R10 = 0.95
#: the default embedder's hybrid R@10 minus the torch model's, at most this far from 0
TARGET_DELTA_R10 = 0.01


def static_embedder(threads: int = 1) -> Embedder:
    """:class:`~cortexgraph.StaticEmbedder` (its lookups use no threads: ``threads`` is
    accepted for the common signature only)."""
    return StaticEmbedder()


def hash_embedder(threads: int = 1) -> Embedder:
    """:class:`~cortexgraph.HashEmbedder` at 384 dimensions (``threads`` is ignored)."""
    return HashEmbedder()


#: ``--embedders`` key -> the embedder's class (or maker); each is made with ``threads=...``
EMBEDDERS: dict[str, Callable[..., Embedder]] = {
    "local": LocalEmbedder,
    "torch": TorchEmbedder,
    "static": static_embedder,
    "hash": hash_embedder,
}
CLASS_NAMES = {
    "local": "LocalEmbedder",
    "torch": "TorchEmbedder",
    "static": "StaticEmbedder",
    "hash": "HashEmbedder",
}
#: the figures an earlier prototype measured for this recipe (R0: no keyword context)
PROTOTYPE_R0 = {"keyword": 0.655, "vector": 0.563, "hybrid": 0.742}

_clock = time.perf_counter
_DIA = re.compile(r"D(\d+):(\d+)")
_SESSION = re.compile(r"session_(\d+)")


# -- the data -------------------------------------------------------------------------------


def session_ms(text: str) -> int:
    """``"1:56 pm on 8 May, 2023"`` as UTC milliseconds."""
    moment = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return int(moment.replace(tzinfo=UTC).timestamp() * 1000)


def clean_evidence(raw: Sequence[str], valid: set[str]) -> list[str]:
    """The README's clean-up: split strings holding several ids ("D8:6; D9:17"), read
    "D:11:26" as D11:26 and "D30:05" as D30:5, drop ids the conversation does not have."""
    out: list[str] = []
    for item in raw:
        for part in re.split(r"[;,\s]+", item):
            match = _DIA.fullmatch(part.replace("D:", "D", 1))
            if match is None:
                continue
            dia = f"D{int(match.group(1))}:{int(match.group(2))}"
            if dia in valid and dia not in out:
                out.append(dia)
    return out


def sessions(conv: dict[str, Any]) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """A sample's ``conversation`` as ``(session number, its turns)``, in session order."""
    numbers = sorted(
        int(m.group(1))
        for key in conv
        if (m := _SESSION.fullmatch(key)) and isinstance(conv[key], list)
    )
    for number in numbers:
        yield number, conv[f"session_{number}"]


def turn_texts(path: Path) -> list[str]:
    """The ``text`` of every dialogue turn of the file, conversation by conversation, in
    session order (as written, without image captions)."""
    return [
        turn["text"]
        for sample in json.loads(path.read_text(encoding="utf-8"))
        for _, turns in sessions(sample["conversation"])
        for turn in turns
    ]


def question_texts(path: Path) -> list[str]:
    """Every question of the file, conversation by conversation, in the file's order."""
    return [
        qa["question"]
        for sample in json.loads(path.read_text(encoding="utf-8"))
        for qa in sample["qa"]
    ]


def load(path: Path) -> list[dict[str, Any]]:
    """Conversations: ``{"id", "turns": [{dia, session, speaker, text, at}], "questions"}``."""
    conversations = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conv = sample["conversation"]
        turns = []
        for number, session in sessions(conv):
            at = session_ms(conv[f"session_{number}_date_time"])
            for turn in session:
                text = turn["text"]
                if turn.get("blip_caption"):
                    text = f"{text} [shares {turn['blip_caption']}]"
                turns.append(
                    {
                        "dia": turn["dia_id"],
                        "session": number,
                        "speaker": turn["speaker"],
                        "text": text,
                        "at": at,
                    }
                )
        valid = {t["dia"] for t in turns}
        questions = []
        for qa in sample["qa"]:
            if qa["category"] not in CATEGORIES:
                continue  # category 5 (adversarial) has no answer
            evidence = clean_evidence(qa.get("evidence", []), valid)
            if evidence:
                questions.append(
                    {"question": qa["question"], "category": qa["category"], "evidence": evidence}
                )
        conversations.append({"id": sample["sample_id"], "turns": turns, "questions": questions})
    return conversations


def actor_name(sample_id: str) -> str:
    """``conv-26`` -> ``conv-26``: lower case, anything outside ``a-z 0-9 . _ -`` -> ``-``."""
    return re.sub(r"[^a-z0-9._-]", "-", sample_id.lower())[:64]


# -- measuring ----------------------------------------------------------------------------------


def index_conversation(
    root: Path, conv: dict[str, Any], embedder: TimedEmbedder
) -> tuple[cg.Cortex, dict[bytes, str], float]:
    """Open a store for the conversation and write its turns and edges in one batch.

    Returns the open store, memory id -> dia id, and the seconds the batch took.
    """
    cx = cg.open(root, actor_name(conv["id"]), sync=False, embedder=embedder)
    dia_of: dict[bytes, str] = {}
    start = _clock()
    with cx.batch() as b:
        previous: tuple[int, cg.MemoryURI] | None = None
        for position, turn in enumerate(conv["turns"]):
            event = cg.Event(text=turn["text"], speaker=turn["speaker"], occurred_at=turn["at"])
            uri = b.write(event, ns=NS, at=turn["at"] + position)
            dia_of[uri.id] = turn["dia"]
            if previous is not None and previous[0] == turn["session"]:
                b.add_edge(uri, previous[1], "relates_to", at=turn["at"] + position)
            previous = (turn["session"], uri)
    return cx, dia_of, _clock() - start


def recall_at(found: Sequence[str], evidence: Sequence[str], k: int) -> float:
    return len(set(found[:k]) & set(evidence)) / len(evidence)


def measure(
    data: Path,
    root: Path,
    limit: int | None,
    embedders: Sequence[str] = ("local",),
    *,
    threads: int = 1,
) -> dict[str, Any]:
    """Every figure of the suite, as plain data (see :func:`format_report`): the
    measurements of :func:`measure_embedder` for each key of :data:`EMBEDDERS` in
    ``embedders``, one after the other, each on stores of its own under ``root``."""
    progress(f"locomo: reading {data}")
    conversations = load(data)[:limit]
    runs = {}
    for key in embedders:
        (root / key).mkdir()
        runs[key] = measure_embedder(conversations, root / key, key, threads)
    return {
        "conversations": [c["id"] for c in conversations],
        "questions": sum(len(c["questions"]) for c in conversations),
        "threads": threads,
        "runs": runs,
    }


def measure_embedder(
    conversations: list[dict[str, Any]], root: Path, key: str, threads: int
) -> dict[str, Any]:
    """Index every conversation with the embedder ``key`` and ask it every question."""
    progress(f"locomo: loading all-MiniLM-L6-v2 ({CLASS_NAMES[key]}, threads={threads})")
    start = _clock()
    embedder = TimedEmbedder(EMBEDDERS[key](threads=threads))
    model_load = _clock() - start
    per_question: list[dict[str, Any]] = []
    latency: dict[str, list[float]] = {label: [] for label, _, _ in RUNS}
    embed_ms: dict[str, list[float]] = {label: [] for label, _, _ in RUNS}
    index = {"turns": 0, "edges": 0, "write_s": 0.0, "vector_s": 0.0, "embed_s": 0.0}
    hnsw_overlap: list[float] = []
    for conv in conversations:
        cx, dia_of, write_s = index_conversation(root, conv, embedder)
        try:
            turns = len(conv["turns"])
            index["turns"] += turns
            index["edges"] += sum(
                1
                for a, b in zip(conv["turns"], conv["turns"][1:], strict=False)
                if a["session"] == b["session"]
            )
            index["write_s"] += write_s
            questions = conv["questions"]
            # The first vector recall embeds every turn and builds the HNSW index.
            embedder.seconds = 0.0
            start = _clock()
            cx.recall(questions[0]["question"], k=K, mode="vector")
            index["vector_s"] += _clock() - start
            index["embed_s"] += embedder.seconds
            progress(
                f"locomo: {key}: {conv['id']}: {turns} turns written in {write_s:.2f} s,"
                f" embedded and indexed in {_clock() - start:.1f} s; {len(questions)} questions"
            )
            results: dict[str, list[list[str]]] = {}
            for label, mode, fusion in RUNS:
                found_all = []
                for q in questions:
                    embedder.seconds = 0.0
                    start = _clock()
                    hits = cx.recall(q["question"], k=K, mode=mode, fusion=fusion)
                    latency[label].append((_clock() - start) * 1e3)
                    embed_ms[label].append(embedder.seconds * 1e3)
                    found_all.append([dia_of[hit.uri.id] for hit in hits])
                results[label] = found_all
            # HNSW against exact search over the same stored vectors (target >= 0.95).
            state = cx._vector_state()
            vectors = state.embedder.embed([q["question"] for q in questions])
            for vector in vectors:
                approx = {memory_id for memory_id, _ in state.index.search(vector, 10)}
                exact = {memory_id for memory_id, _ in state.index.exact_search(vector, 10)}
                hnsw_overlap.append(len(approx & exact) / len(exact))
            for i, q in enumerate(questions):
                per_question.append(
                    {
                        "conversation": conv["id"],
                        "category": q["category"],
                        "recall": {
                            label: {k: recall_at(results[label][i], q["evidence"], k) for k in KS}
                            for label, _, _ in RUNS
                        },
                    }
                )
        finally:
            cx.close()
    return {
        "embedder": embedder.name,
        "class": CLASS_NAMES[key],
        "model_load_s": model_load,
        "index": index,
        "per_question": per_question,
        "latency_ms": latency,
        "embed_ms": embed_ms,
        "hnsw_vs_exact_r10": float(np.mean(hnsw_overlap)) if hnsw_overlap else float("nan"),
        "hnsw_questions": len(hnsw_overlap),
    }


# -- report -------------------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def summarise(result: dict[str, Any]) -> dict[str, Any]:
    """Per embedder, recall@k per mode (overall and per category) and latency percentiles
    per mode; and, when both ran, the default embedder against the torch model."""
    runs = {key: summarise_run(run) for key, run in result["runs"].items()}
    out: dict[str, Any] = {"summaries": runs, "comparison": None}
    if "local" in runs and "torch" in runs:
        default, torch = result["runs"]["local"], result["runs"]["torch"]
        out["comparison"] = {
            label: {
                "delta_r10": runs["local"]["quality"][label]["all"][10]
                - runs["torch"]["quality"][label]["all"][10],
                "questions_differing_r10": sum(
                    a["recall"][label][10] != b["recall"][label][10]
                    for a, b in zip(default["per_question"], torch["per_question"], strict=True)
                ),
            }
            for label, _, _ in RUNS
        }
    return out


def summarise_run(run: dict[str, Any]) -> dict[str, Any]:
    """One embedder's recall@k per mode, overall and per category; latency percentiles."""
    rows = run["per_question"]
    quality = {}
    for label, _, _ in RUNS:
        entry: dict[str, Any] = {
            "all": {k: _mean([r["recall"][label][k] for r in rows]) for k in KS},
            "n": len(rows),
        }
        for cat in CATEGORIES:
            picked = [r for r in rows if r["category"] == cat]
            entry[str(cat)] = {k: _mean([r["recall"][label][k] for r in picked]) for k in KS}
            entry[f"n{cat}"] = len(picked)
        quality[label] = entry
    latency = {}
    for label, _, _ in RUNS:
        total, embed = run["latency_ms"][label], run["embed_ms"][label]
        rest = [t - e for t, e in zip(total, embed, strict=True)]
        latency[label] = {
            "p50": percentile(total, 50),
            "p95": percentile(total, 95),
            "embed_p50": percentile(embed, 50),
            "embed_p95": percentile(embed, 95),
            "rest_p50": percentile(rest, 50),
            "rest_p95": percentile(rest, 95),
        }
    return {"quality": quality, "latency": latency}


def _met(ok: bool) -> str:
    return "yes" if ok else "no"


def format_report(result: dict[str, Any], summary: dict[str, Any]) -> str:
    runs, summaries = result["runs"], summary["summaries"]
    names = ", ".join(f"{run['class']} ({run['embedder']})" for run in runs.values())
    lines = [
        f"LoCoMo dev split: {', '.join(result['conversations'])}; {result['questions']}"
        " questions (categories 1-4, evidence cleaned); embedders:"
        f" {names}, {result['threads']} thread{'' if result['threads'] == 1 else 's'} each"
    ]
    first = next(iter(summaries.values()))["quality"]
    header = ["embedder", "mode", "R@5", "R@10", "R@20"] + [
        f"cat{c} {name} R@10 (n={first['keyword'][f'n{c}']})" for c, name in CATEGORIES.items()
    ]
    cells = []
    for key, run in runs.items():
        quality = summaries[key]["quality"]
        for label, _, _ in RUNS:
            q = quality[label]
            cells.append(
                [run["class"], label, *(f"{q['all'][k]:.3f}" for k in KS)]
                + [f"{q[str(c)][10]:.3f}" for c in CATEGORIES]
            )
    lines += ["", markdown_table(header, cells, set(range(2, len(header))))]
    header = ["embedder", "mode"] + [f"cat{c} R@5/10/20" for c in CATEGORIES]
    cells = [
        [run["class"], label]
        + [
            "/".join(f"{summaries[key]['quality'][label][str(c)][k]:.3f}" for k in KS)
            for c in CATEGORIES
        ]
        for key, run in runs.items()
        for label, _, _ in RUNS
    ]
    lines += ["", markdown_table(header, cells, set(range(2, len(header))))]
    comparison = summary["comparison"]
    if comparison is not None:
        header = ["mode", "R@10 default", "R@10 torch", "default - torch", "questions differing"]
        cells = [
            [
                label,
                f"{summaries['local']['quality'][label]['all'][10]:.3f}",
                f"{summaries['torch']['quality'][label]['all'][10]:.3f}",
                f"{comparison[label]['delta_r10']:+.4f}",
                f"{comparison[label]['questions_differing_r10']} of {result['questions']}",
            ]
            for label, _, _ in RUNS
        ]
        lines += ["", markdown_table(header, cells, {1, 2, 3, 4})]
    targets = [
        [
            f"hybrid evidence R@10, {run['class']}",
            f"{summaries[key]['quality']['hybrid']['all'][10]:.3f}",
            f">= {TARGET_HYBRID_R10}",
            _met(summaries[key]["quality"]["hybrid"]["all"][10] >= TARGET_HYBRID_R10),
        ]
        for key, run in runs.items()
    ]
    if comparison is not None:
        delta = comparison["hybrid"]["delta_r10"]
        targets.append(
            [
                "hybrid R@10, default - torch",
                f"{delta:+.4f}",
                f"|delta| <= {TARGET_DELTA_R10}",
                _met(abs(delta) <= TARGET_DELTA_R10),
            ]
        )
    else:
        targets.append(["hybrid R@10, default - torch", "-", f"|delta| <= {TARGET_DELTA_R10}", "-"])
    targets += [
        [
            f"HNSW vs exact R@10, {run['class']}, {run['hnsw_questions']} questions",
            f"{run['hnsw_vs_exact_r10']:.4f}",
            f">= {TARGET_HNSW_R10}",
            _met(run["hnsw_vs_exact_r10"] >= TARGET_HNSW_R10),
        ]
        for run in runs.values()
    ]
    lines += ["", markdown_table(["target", "figure", "target", "met"], targets, {1})]
    header = ["indexing", "seconds", "ms per turn"]
    cells = []
    for run in runs.values():
        idx = run["index"]
        turns = idx["turns"]
        cells += [
            [f"{run['class']}: model load", f"{run['model_load_s']:.1f}", "-"],
            [
                f"  writes: {turns:,} Events + {idx['edges']:,} relates_to edges, one batch per"
                " conversation",
                f"{idx['write_s']:.2f}",
                f"{idx['write_s'] / turns * 1e3:.2f}",
            ],
            [
                "  first vector recall: embed every turn + build HNSW",
                f"{idx['vector_s']:.1f}",
                f"{idx['vector_s'] / turns * 1e3:.1f}",
            ],
            [
                "    of which embedding",
                f"{idx['embed_s']:.1f}",
                f"{idx['embed_s'] / turns * 1e3:.1f}",
            ],
        ]
    lines += ["", markdown_table(header, cells, {1, 2})]
    header = [
        "query (k=20)",
        "p50 ms",
        "p95 ms",
        "embed p50",
        "embed p95",
        "rest p50",
        "rest p95",
    ]
    keys = ("p50", "p95", "embed_p50", "embed_p95", "rest_p50", "rest_p95")
    cells = [
        [
            f"{run['class']}: recall mode={label}",
            *(f"{summaries[key]['latency'][label][field]:.2f}" for field in keys),
        ]
        for key, run in runs.items()
        for label, _, _ in RUNS
    ]
    lines += ["", markdown_table(header, cells, set(range(1, 7)))]
    return "\n".join(lines)


def parse_embedders(text: str) -> list[str]:
    """``--embedders``: comma-separated keys of :data:`EMBEDDERS`, each once."""
    keys = [key.strip() for key in text.split(",") if key.strip()]
    unknown = [key for key in keys if key not in EMBEDDERS]
    if unknown or not keys or len(set(keys)) != len(keys):
        raise argparse.ArgumentTypeError(
            f"expected distinct names from {', '.join(EMBEDDERS)}, comma-separated; got {text!r}"
        )
    return keys


def default_embedders() -> list[str]:
    """``local,torch`` when torch can be imported, else ``local`` (saying so on stderr)."""
    if torch_available():
        return ["local", "torch"]
    progress("locomo: torch is not importable: measuring LocalEmbedder only (no comparison)")
    return ["local"]


def require_data(parser: argparse.ArgumentParser, data: Path) -> None:
    """Stop with a usage error naming ``--data`` when the LoCoMo file is not there."""
    if not data.is_file():
        parser.error(
            f"the LoCoMo file {data} does not exist: pass --data or set CORTEXGRAPH_LOCOMO"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo_dev5.json")
    parser.add_argument("--n", type=int, default=None, help="only the first N conversations")
    parser.add_argument(
        "--embedders",
        type=parse_embedders,
        default=None,
        help="which embedders, comma-separated: local (LocalEmbedder, ONNX Runtime), torch"
        " (TorchEmbedder), static (StaticEmbedder), hash (HashEmbedder); default: local,torch"
        " when torch can be"
        " imported, else local",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="each embedder's threads (default 1: on a shared 2-core machine, more threads"
        " spin against other processes and make query embedding several times slower)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument(
        "--dir", type=Path, default=None, help="parent of the temporary stores (default: TMPDIR)"
    )
    args = parser.parse_args(argv)
    require_data(parser, args.data)
    if args.n is not None and args.n < 1:
        parser.error("--n must be positive")
    if not 1 <= args.threads <= 256:
        parser.error("--threads must be between 1 and 256")
    embedders = args.embedders if args.embedders is not None else default_embedders()
    with tempfile.TemporaryDirectory(prefix="cortexgraph-locomo-", dir=args.dir) as tmp:
        info = environment(0, Path(tmp))
        result = measure(args.data, Path(tmp), args.n, embedders, threads=args.threads)
    info["load_avg_1min_end"] = round(os.getloadavg()[0], 2)
    summary = summarise(result)
    progress("locomo: done")
    if args.json:
        print(json.dumps({"environment": info, **json_result(result), **summary}, indent=2))
        return 0
    print(print_environment(info, result["threads"]))
    print()
    print(format_report(result, summary))
    return 0


def json_result(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` without the per-query latency lists (the summary has their percentiles)."""
    lists = ("latency_ms", "embed_ms")
    return {
        **result,
        "runs": {
            key: {field: value for field, value in run.items() if field not in lists}
            for key, run in result["runs"].items()
        },
    }


def print_environment(info: dict[str, Any], threads: int) -> str:
    return (
        f"cortexgraph {info['cortexgraph']}, Python {info['python']}, {info['cpus']} CPUs"
        f" (embedder threads: {threads}),"
        f" {info['platform']}\n1-min load average {info['load_avg_1min_start']} at start,"
        f" {info['load_avg_1min_end']} at end"
    )


if __name__ == "__main__":
    sys.exit(main())
