"""Measure what the Merkle commitments cost: writes with and without them, replay, proofs.

Usage (``benches/run.py --suite merkle`` runs the same measurements)::

    .venv/bin/python benches/merkle.py
    .venv/bin/python benches/merkle.py --n 20000 --json
    .venv/bin/python benches/merkle.py --dir /mnt/ssd/tmp     # where the stores live

These are the figures of the Merkle commitments' targets: Merkle maintenance at most 1.5x
the cost of the same writes without it, replay and verify of a 100,000-entry journal at
>= 20,000 entries/s, and >= 20,000 SMT proof verifications/s. Each is measured next to a
baseline run in the same process (see ``benches/README.md`` for the figures on one machine):

1. batched writes with Merkle maintenance against the same writes without it: 20 batches of
   1,000 memories (one write transaction each, sync on), first into a fresh store, then into
   a copy of a store already holding ``--n`` memories (a deeper SMT). "Without" is the same
   cortexgraph code with ``cortexgraph.writing.mmr_mutations`` and
   ``cortexgraph.writing.smt_mutations`` patched to return no mutations, so the ratio is
   what the MMR and SMT work adds to a write and nothing else. Both sides write the same
   memories, and their ``journal``, ``heads``, ``versions`` and ``idx`` tables are checked
   to be byte-identical. 3 trials; each runs both sides, in alternating order; best and
   median memories/s, and the ratio of with to without time.
2. replay of a ``--n``-entry journal (90% writes, 7% updates, 3% tombstones): ``cx.rebuild()``
   and ``cortexgraph.verify(root, actor)``, in entries/s. The baseline is the floor of any
   replay's reading: a py-lmdb cursor over the ``journal`` table that reads every entry and
   decodes it with ``cbor2.loads``. A second floor is its writing: every put and delete
   one ``cx.rebuild()`` made (recorded), applied in order to a fresh raw environment in one
   write transaction with sync off, by py-lmdb alone.
3. proofs over random memories of that store: ``cx.prove`` (baseline: the same LMDB reads in
   one raw read transaction), ``verify_memory_proof`` (baseline: its two tree checks alone),
   and the raw ``verify_smt`` and ``verify_inclusion`` on the proofs' parts (baseline: the
   same number of calls of the hash function on 65-byte inputs, i.e. the hashing floor).

Progress goes to stderr; the table (or JSON with ``--json``) to stdout. Nothing here fails
on timing: a missed target is reported as ``no``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cbor2
import lmdb

import cortexgraph as cg
import cortexgraph.writing as writing_module
from _report import environment, markdown_table, progress
from _workload import (
    ACTOR,
    BASE_AT,
    NS,
    STEP_MS,
    WRITE_TABLES,
    RawStore,
    check_same_bytes,
    make_memories,
    write_cortex,
)
from cortexgraph.core.commitments import (
    MemoryProof,
    build_memory_proof,
    head_commitment,
    verify_memory_proof,
)
from cortexgraph.core.hashing import hash_function
from cortexgraph.core.journal import decode_entry
from cortexgraph.core.mmr import mmr_leaf_hash, verify_inclusion
from cortexgraph.core.smt import smt_key, verify_smt
from cortexgraph.store.txn import WriteTxn

BATCH = 1_000
BATCHES = 20
REPEATS = 3
REPLAY_REPEATS = 2
PROOFS = 5_000
PROOF_PASSES = 3
#: Journal mix of the replay store, per 100 entries.
UPDATES_PER_100 = 7
TOMBSTONES_PER_100 = 3

TARGET_OVERHEAD = 1.5  # x the writes without Merkle maintenance, at most
TARGET_REPLAY_RATE = 20_000  # entries/s, at least
TARGET_SMT_RATE = 20_000  # verify_smt calls/s, at least

_clock = time.perf_counter


# -- Merkle off -----------------------------------------------------------------------------


def _no_mutations(*_args: Any, **_kwargs: Any) -> list[Any]:
    return []


#: what the patched MMR step returns: one constant row (``EntryWriter.write`` reads the
#: entry's leaf from the first row it is given), always the same key, no hashing
_PLACEHOLDER_ROW = [("mmr", b"\xff" * 8, bytes(32))]


def _placeholder_mmr(*_args: Any, **_kwargs: Any) -> list[Any]:
    return _PLACEHOLDER_ROW


@contextmanager
def merkle_off() -> Iterator[None]:
    """Batches made inside skip the MMR and SMT work (the stores they write are incomplete).

    ``writing.EntryWriter`` looks ``mmr_mutations`` and ``smt_mutations`` up
    in ``cortexgraph.writing`` at call time, so patching them there removes exactly the
    Merkle work: the hashing, the ``mmr`` and ``smt`` reads and the row puts. What stays
    is the bookkeeping around them (a dirty-set insert per entry, one empty
    ``apply_mutations`` call per batch) and one put of the same constant ``mmr`` row per
    entry (``EntryWriter.write`` takes the entry's leaf from the first MMR row), about a
    microsecond per memory.
    """
    saved = writing_module.mmr_mutations, writing_module.smt_mutations
    writing_module.mmr_mutations = _placeholder_mmr  # type: ignore[assignment]
    writing_module.smt_mutations = _no_mutations  # type: ignore[assignment]
    try:
        yield
    finally:
        writing_module.mmr_mutations, writing_module.smt_mutations = saved


# -- stores ---------------------------------------------------------------------------------


def build_store(path: Path, n: int, *, seed: int = 3) -> None:
    """A store of ``n`` written memories, built with sync off (building is not measured).

    With the default seed it equals ``run.py``'s resolve store of ``n`` memories.
    """
    memories = make_memories(n, seed=seed)
    cx = cg.open(path, ACTOR, sync=False)
    try:
        start = _clock()
        write_cortex(cx, memories, batch_size=BATCH)
        progress(f"  built {n:,} memories at {n / (_clock() - start):,.0f}/s (sync off, Merkle on)")
    finally:
        cx.close()


def journal_plan(n: int) -> list[str]:
    """The op of each of ``n`` entries: ``w``rite, ``u``pdate or ``t``ombstone."""
    plan: list[str] = []
    live = 0
    for i in range(n):
        slot = i % 100
        if slot < UPDATES_PER_100 and live:
            plan.append("u")
        elif slot < UPDATES_PER_100 + TOMBSTONES_PER_100 and live > 1:
            plan.append("t")
            live -= 1
        else:
            plan.append("w")
            live += 1
    return plan


def build_journal(path: Path, n: int, *, seed: int = 7) -> list[cg.MemoryURI]:
    """A store whose journal holds exactly ``n`` entries; returns every memory's head URI.

    Entries follow :func:`journal_plan`: about 90% writes, 7% updates (a new text) of a
    random live memory and 3% tombstones of one; 1,000 entries per batch, sync off.
    """
    plan = journal_plan(n)
    memories = iter(make_memories(plan.count("w"), seed=seed))
    rng = random.Random(seed)
    uris: list[cg.MemoryURI] = []
    texts: list[str] = []
    live: list[int] = []
    cx = cg.open(path, ACTOR, sync=False)
    try:
        start = _clock()
        for first in range(0, n, BATCH):
            with cx.batch() as b:
                for i in range(first, min(first + BATCH, n)):
                    at = BASE_AT + i * STEP_MS
                    op = plan[i]
                    if op == "w":
                        memory = next(memories)
                        live.append(len(uris))
                        uris.append(b.write(memory, ns=NS, at=at).head)
                        texts.append(memory.text)
                    elif op == "u":
                        k = live[rng.randrange(len(live))]
                        b.update(uris[k], text=f"{texts[k]} (revised at entry {i})", at=at)
                    else:
                        pos = rng.randrange(len(live))
                        k = live[pos]
                        live[pos] = live[-1]
                        live.pop()
                        b.tombstone(uris[k], reason="superseded", at=at)
        if cx.seq != n:
            raise RuntimeError(f"the replay journal holds {cx.seq} entries, not {n}")
        progress(f"  built {n:,} entries at {n / (_clock() - start):,.0f}/s (sync off, Merkle on)")
    finally:
        cx.close()
    return uris


def copy_store(source: Path, target: Path) -> None:
    """Copy a closed store's environment, then flush it so its writeback is not timed."""
    (target / ACTOR).mkdir(parents=True)
    shutil.copyfile(source / ACTOR / "data.mdb", target / ACTOR / "data.mdb")
    os.sync()


# -- 1. batched writes with and without Merkle maintenance ----------------------------------


def measure_writes(
    root: Path, base: Path | None, base_size: int
) -> tuple[list[float], list[float]]:
    """Seconds per trial of 20 batches of 1,000 memories, with and without Merkle work.

    ``base`` is a closed store to start each side from (a fresh copy per side and trial),
    or None for a fresh store; ``base_size`` is the number of entries it holds.
    """
    start_at = BASE_AT + base_size * STEP_MS
    memories = make_memories(BATCH * BATCHES, seed=1, start_at=start_at)
    label = "fresh store" if base is None else f"store of {base_size:,}"
    with_s: list[float] = []
    without_s: list[float] = []
    for trial in range(REPEATS):
        order = (True, False) if trial % 2 == 0 else (False, True)
        paths: dict[bool, Path] = {}
        for merkle in order:
            path = root / f"writes-{trial}-{'with' if merkle else 'without'}"
            if base is not None:
                copy_store(base, path)
            cx = cg.open(path, ACTOR, sync=True)
            try:
                if merkle:
                    start = _clock()
                    write_cortex(cx, memories, batch_size=BATCH, start_at=start_at)
                    with_s.append(_clock() - start)
                else:
                    with merkle_off():
                        start = _clock()
                        write_cortex(cx, memories, batch_size=BATCH, start_at=start_at)
                        without_s.append(_clock() - start)
            finally:
                cx.close()
            paths[merkle] = path
        if trial == 0:  # same memories, same ids, same non-Merkle tables
            check_same_bytes(paths[True] / ACTOR, paths[False] / ACTOR, WRITE_TABLES)
        for path in paths.values():
            shutil.rmtree(path)
        progress(
            f"batched writes ({label}): trial {trial + 1}/{REPEATS}:"
            f" with Merkle {len(memories) / with_s[-1]:,.0f}/s,"
            f" without {len(memories) / without_s[-1]:,.0f}/s"
        )
    return with_s, without_s


# -- 2. replay --------------------------------------------------------------------------------


def scan_journal(path: Path, *, decode: bool) -> tuple[int, float]:
    """Entries in the journal of the closed store at ``path`` and seconds to read them all."""
    env = lmdb.open(str(path / ACTOR), max_dbs=32, readonly=True, lock=False, readahead=False)
    try:
        db = env.open_db(b"journal", create=False)
        loads = cbor2.loads
        count = 0
        start = _clock()
        with env.begin(db=db, buffers=False) as txn:
            if decode:
                for _key, value in txn.cursor():
                    loads(value)
                    count += 1
            else:
                for _key, _value in txn.cursor():
                    count += 1
        return count, _clock() - start
    finally:
        env.close()


def rebuild_mutations(root: Path) -> list[tuple[str, bytes, bytes | None]]:
    """Every row ``cx.rebuild()`` writes on the store at ``root``, in order.

    A rebuild replays in memory and then loads each emptied table in key order
    (``WriteTxn.put_sorted``); the loads are recorded by wrapping it for one rebuild (the
    drops of the tables are not recorded).
    """
    recorded: list[tuple[str, bytes, bytes | None]] = []
    real = WriteTxn.put_sorted

    def recording(self: WriteTxn, table: str, items: list[tuple[bytes, bytes]]) -> None:
        recorded.extend((table, key, value) for key, value in items)
        real(self, table, items)

    WriteTxn.put_sorted = recording  # type: ignore[method-assign]
    try:
        with cg.open(root, ACTOR) as cx:
            cx.rebuild()
    finally:
        WriteTxn.put_sorted = real  # type: ignore[method-assign]
    if not recorded:
        raise RuntimeError("the rebuild wrote no rows through WriteTxn.put_sorted")
    return recorded


def raw_apply_rate(path: Path, mutations: list[tuple[str, bytes, bytes | None]], n: int) -> float:
    """Entries/s of applying ``mutations`` (a rebuild of ``n`` entries) to a fresh raw store
    in one write transaction with sync off: a replay's LMDB work with no cortexgraph code."""
    raw = RawStore.create(path, sync=False)
    try:
        return n / raw.timed_replay([mutations])
    finally:
        raw.close()
        shutil.rmtree(path)


def measure_replay(root: Path, n: int) -> dict[str, list[float]]:
    """Entries/s of each repeat: rebuild, verify, the raw scans, and raw puts of what a
    rebuild writes."""
    rates: dict[str, list[float]] = {
        "rebuild": [],
        "verify": [],
        "scan": [],
        "scan_decode": [],
        "puts": [],
    }
    mutations = rebuild_mutations(root)
    for rep in range(REPLAY_REPEATS):
        rates["puts"].append(raw_apply_rate(root.parent / f"replay-raw-{rep}", mutations, n))
        for kind, decode in (("scan", False), ("scan_decode", True)):
            count, seconds = scan_journal(root, decode=decode)
            rates[kind].append(count / seconds)
        cx = cg.open(root, ACTOR)
        try:
            start = _clock()
            count = cx.rebuild()
            rates["rebuild"].append(count / (_clock() - start))
        finally:
            cx.close()
        start = _clock()
        report = cg.verify(root, ACTOR)
        seconds = _clock() - start
        if not report.ok or report.actors[0].entries != n:
            raise RuntimeError(f"verify failed on the replay store: {report.to_dict()}")
        rates["verify"].append(n / seconds)
        progress(
            f"replay: repeat {rep + 1}/{REPLAY_REPEATS}: rebuild {rates['rebuild'][-1]:,.0f}/s,"
            f" verify {rates['verify'][-1]:,.0f}/s,"
            f" py-lmdb scan + cbor2.loads {rates['scan_decode'][-1]:,.0f}/s,"
            f" raw puts of its {len(mutations) / n:.1f} rows/entry {rates['puts'][-1]:,.0f}/s"
        )
    return rates


# -- 3. proofs --------------------------------------------------------------------------------


def _rate(call: Callable[[Any], object], items: Sequence[Any]) -> float:
    start = _clock()
    for item in items:
        call(item)
    return len(items) / (_clock() - start)


def _starred_rate(call: Callable[..., object], items: Sequence[tuple[Any, ...]]) -> float:
    start = _clock()
    for item in items:
        call(*item)
    return len(items) / (_clock() - start)


def _smt_parts(p: MemoryProof) -> tuple[Any, ...]:
    h = p.hash_name
    value = head_commitment(h, p.head_record, p.head_version_record)
    return (h, p.smt_root, smt_key(h, p.uri.ns, p.uri.id), value, p.smt_proof)


def _mmr_parts(p: MemoryProof) -> tuple[Any, ...]:
    seq = decode_entry(p.entry).seq
    leaf = mmr_leaf_hash(p.hash_name, p.entry)
    return (p.hash_name, seq - 1, p.journal_size, leaf, list(p.mmr_proof), p.mmr_root)


def both_checks(smt: tuple[Any, ...], mmr: tuple[Any, ...]) -> bool:
    """The two tree checks of ``verify_memory_proof``, on their prepared arguments."""
    return verify_smt(*smt) and verify_inclusion(*mmr)


class ProofWork:
    """Proofs of ``count`` random memories of an open store, and what the baselines need.

    ``reads`` holds, per proof, the ``(table handle, key)`` of every LMDB read ``cx.prove``
    makes, recorded through the same builder it calls; :meth:`raw_reads` repeats them in one
    raw read transaction. ``smt`` and ``mmr`` are the argument tuples of ``verify_smt`` and
    ``verify_inclusion`` for each proof's two parts; ``smt_hashes`` and ``mmr_hashes`` count
    the hash calls each check makes (a leaf plus one per SMT level; one per MMR sibling).
    """

    def __init__(
        self, cx: cg.Cortex, uris: Sequence[cg.MemoryURI], count: int, seed: int = 11
    ) -> None:
        self.sample = random.Random(seed).sample(list(uris), min(count, len(uris)))
        self.trusted = cx.overall_root()
        self.proofs = [cx.prove(uri) for uri in self.sample]
        self.raw = RawStore.borrow(cx)
        self.reads: list[list[tuple[Any, bytes]]] = []
        dbs = self.raw.dbs
        with cx._env.read() as txn:
            for p in self.proofs:
                keys: list[tuple[Any, bytes]] = [(dbs["heads"], p.uri.id)]  # cx.prove's own

                def get(table: str, key: bytes, keys: list[tuple[Any, bytes]] = keys) -> Any:
                    keys.append((dbs[table], key))
                    return txn.get(table, key)

                again = build_memory_proof(
                    cx.hash_name, get, p.uri, p.journal_size, p.uri.version or 1
                )
                if again != p:
                    raise RuntimeError("recording the reads of a proof changed the proof")
                self.reads.append(keys)
        self.smt = [_smt_parts(p) for p in self.proofs]
        self.mmr = [_mmr_parts(p) for p in self.proofs]
        self.with_root = [(p, self.trusted) for p in self.proofs]
        self.both = list(zip(self.smt, self.mmr, strict=True))
        if not all(verify_memory_proof(p, self.trusted) for p in self.proofs):
            raise RuntimeError("a proof does not verify")
        if not all(both_checks(s, m) for s, m in self.both):
            raise RuntimeError("the SMT or MMR part of a proof does not verify")
        self.hash = hash_function(cx.hash_name)
        self.smt_hashes = [1 + int.from_bytes(s[4][1:3], "big") for s in self.smt]
        self.mmr_hashes = [len(m[4]) for m in self.mmr]

    def raw_reads(self, keys: list[tuple[Any, bytes]]) -> None:
        """The reads of one proof, in one raw read transaction (begun and aborted)."""
        txn = self.raw.env.begin(buffers=False)
        try:
            with txn.cursor(db=self.raw.dbs["journal"]) as cur:
                cur.last()  # the journal size, as cx.prove reads it
            for db, key in keys:
                txn.get(key, db=db)
        finally:
            txn.abort()

    def describe(self) -> str:
        return (
            f"{len(self.proofs):,} proofs; SMT depth {statistics.mean(self.smt_hashes) - 1:.1f}"
            f" (max {max(self.smt_hashes) - 1}), MMR path"
            f" {statistics.mean(self.mmr_hashes):.1f} nodes"
        )


def hash_floor(h: Callable[[bytes], bytes], count: int, data: bytes = bytes(65)) -> None:
    """``count`` calls of ``h`` on a 65-byte input: the hashing a check of that size does."""
    for _ in range(count):
        h(data)


def measure_proofs(
    root: Path, uris: Sequence[cg.MemoryURI]
) -> dict[str, tuple[list[float], list[float]]]:
    """Calls/s of each pass over PROOFS random memories, each next to its baseline."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    cx = cg.open(root, ACTOR, readonly=True)
    try:
        work = ProofWork(cx, uris, PROOFS)
        progress(f"proofs: {work.describe()}")
        h = work.hash
        measures: dict[str, tuple[Callable[[], float], Callable[[], float]]] = {
            "prove": (
                lambda: _rate(cx.prove, work.sample),
                lambda: _rate(work.raw_reads, work.reads),
            ),
            "verify_memory_proof": (
                lambda: _starred_rate(verify_memory_proof, work.with_root),
                lambda: _starred_rate(both_checks, work.both),
            ),
            "verify_smt": (
                lambda: _starred_rate(verify_smt, work.smt),
                lambda: _rate(lambda count: hash_floor(h, count), work.smt_hashes),
            ),
            "verify_inclusion": (
                lambda: _starred_rate(verify_inclusion, work.mmr),
                lambda: _rate(lambda count: hash_floor(h, count), work.mmr_hashes),
            ),
        }
        for name in measures:
            out[name] = ([], [])
        for rep in range(PROOF_PASSES):
            for name, (ours, base) in measures.items():
                out[name][0].append(ours())
                out[name][1].append(base())
            progress(
                f"proofs: pass {rep + 1}/{PROOF_PASSES}: "
                + ", ".join(f"{name} {out[name][0][-1]:,.0f}/s" for name in measures)
            )
    finally:
        cx.close()
    return out


# -- report -----------------------------------------------------------------------------------


def row(
    operation: str,
    unit: str,
    figure: float,
    baseline: float | None,
    baseline_is: str,
    *,
    higher_is_better: bool = True,
    target: str = "",
    met: bool | None = None,
) -> dict[str, Any]:
    """One table row; ``ratio`` is the measured cost as a multiple of the baseline's."""
    ratio = None
    if baseline is not None:
        ratio = baseline / figure if higher_is_better else figure / baseline
    return {
        "operation": operation,
        "unit": unit,
        "figure": figure,
        "baseline": baseline,
        "baseline_is": baseline_is,
        "ratio": ratio,
        "target": target,
        "met": met,
    }


def build_rows(
    writes: dict[str, tuple[list[float], list[float]]],
    replay: dict[str, list[float]],
    proofs: dict[str, tuple[list[float], list[float]]],
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    memories = BATCH * BATCHES
    for label, (with_s, without_s) in writes.items():
        for pick_name, pick in (("best", min), ("median", statistics.median)):
            ours, base = pick(with_s), pick(without_s)
            rows.append(
                row(
                    f"batched write + Merkle, {label} ({pick_name} of {REPEATS})",
                    "memories/s",
                    memories / ours,
                    memories / base,
                    "same, no Merkle",
                    target=f"<= {TARGET_OVERHEAD}x",
                    met=ours / base <= TARGET_OVERHEAD,
                )
            )
    floor = max(replay["scan_decode"])
    for name, label in (("rebuild", "cx.rebuild()"), ("verify", "cg.verify(root, actor)")):
        rate = max(replay[name])
        rows.append(
            row(
                f"replay: {label} (best of {REPLAY_REPEATS})",
                "entries/s",
                rate,
                floor,
                "lmdb scan + cbor2",
                target=f">= {TARGET_REPLAY_RATE:,}/s",
                met=rate >= TARGET_REPLAY_RATE,
            )
        )
    rows.append(
        row(
            f"replay floor: py-lmdb scan + cbor2.loads (best of {REPLAY_REPEATS})",
            "entries/s",
            floor,
            max(replay["scan"]),
            "lmdb scan only",
        )
    )
    puts = max(replay["puts"])
    rows.append(
        row(
            f"replay floor: raw LMDB puts of a rebuild's rows (best of {REPLAY_REPEATS})",
            "entries/s",
            puts,
            None,
            "",
            target=f">= {TARGET_REPLAY_RATE:,}/s",
            met=puts >= TARGET_REPLAY_RATE,
        )
    )
    labels = {
        "prove": ("cx.prove(uri)", "same LMDB reads"),
        "verify_memory_proof": ("verify_memory_proof", "its 2 tree checks"),
        "verify_smt": ("verify_smt (membership)", "hash calls only"),
        "verify_inclusion": ("verify_inclusion (MMR)", "hash calls only"),
    }
    for name, (label, baseline_is) in labels.items():
        ours_rates, base_rates = proofs[name]
        rate = max(ours_rates)
        target, met = "", None
        if name == "verify_smt":
            target, met = f">= {TARGET_SMT_RATE:,}/s", rate >= TARGET_SMT_RATE
        rows.append(
            row(
                f"{label} (best of {PROOF_PASSES})",
                "calls/s",
                rate,
                max(base_rates),
                baseline_is,
                target=target,
                met=met,
            )
        )
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    header = ("operation", "unit", "figure", "baseline", "baseline is", "cost x base", "target")
    header = (*header, "met")
    cells = [
        (
            r["operation"],
            r["unit"],
            f"{r['figure']:,.0f}",
            "-" if r["baseline"] is None else f"{r['baseline']:,.0f}",
            r["baseline_is"] or "-",
            "-" if r["ratio"] is None else f"{r['ratio']:.2f}x",
            r["target"] or "-",
            "-" if r["met"] is None else ("yes" if r["met"] else "no"),
        )
        for r in rows
    ]
    return markdown_table(header, cells, {2, 3, 5})


# -- driver -----------------------------------------------------------------------------------


def measure(root: Path, n: int, *, prefilled: Path | None = None) -> list[dict[str, Any]]:
    """Run every measurement with stores under ``root`` (which must exist); return the rows.

    ``prefilled`` may name a closed store equal to what :func:`build_store` makes for ``n``
    (``run.py`` passes its resolve store, built from the same workload); it is only copied.
    """
    writes: dict[str, tuple[list[float], list[float]]] = {}
    progress(f"batched writes: fresh store, {REPEATS} trials of {BATCHES} x {BATCH:,}")
    writes["fresh store"] = measure_writes(root, None, 0)
    base = prefilled
    if base is None:
        progress(f"batched writes: building a store of {n:,} memories to write into")
        base = root / "prefilled"
        build_store(base, n)
    else:
        progress(f"batched writes: writing into copies of {base}")
        with cg.open(base, ACTOR, readonly=True) as cx:
            if cx.seq != n or cx.stats().memories != n:
                raise RuntimeError(f"{base} does not hold {n:,} written memories")
    writes[f"store of {n:,}"] = measure_writes(root, base, n)
    if prefilled is None:
        shutil.rmtree(base)
    progress(f"replay: building a journal of {n:,} entries")
    replay_root = root / "replay"
    uris = build_journal(replay_root, n)
    replay = measure_replay(replay_root, n)
    progress(f"proofs: {min(PROOFS, len(uris)):,} random memories of the replay store")
    proofs = measure_proofs(replay_root, uris)
    shutil.rmtree(replay_root)
    return build_rows(writes, replay, proofs)


def header_lines(info: dict[str, Any], n: int) -> list[str]:
    return [
        f"cortexgraph {info['cortexgraph']}, Python {info['python']}, LMDB {info['lmdb']}"
        f" (py-lmdb {info['py_lmdb']}), {info['cpus']} CPUs, {info['platform']}",
        f"Merkle suite: prefilled store {n:,} memories, replay journal {n:,} entries;"
        f" 1-min load average {info['load_avg_1min_start']} at start,"
        f" {info['load_avg_1min_end']} at end",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--n",
        type=int,
        default=100_000,
        help="memories in the prefilled store and entries in the replay journal (default 100000)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--dir", type=Path, default=None, help="parent of the temporary stores (default: TMPDIR)"
    )
    args = parser.parse_args(argv)
    if args.n < 100:
        parser.error("--n must be at least 100")
    with tempfile.TemporaryDirectory(prefix="cortexgraph-bench-merkle-", dir=args.dir) as tmp:
        root = Path(tmp)
        info = environment(args.n, root)
        progress(f"stores under {root}")
        rows = measure(root, args.n)
    info["load_avg_1min_end"] = round(os.getloadavg()[0], 2)
    progress("done")
    if args.json:
        print(json.dumps({"environment": info, "rows": rows}, indent=2, ensure_ascii=False))
    else:
        print("\n".join(header_lines(info, args.n)))
        print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
