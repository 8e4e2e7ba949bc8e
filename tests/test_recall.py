"""Recall: BM25 against a brute-force reference, the postings and vector index against the
journal (also after SIGKILL), filters, fusion, graph expansion and embedder records."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.core.fusion import RECALL_BM25, embed_text, expand, fuse, fuse_scores
from cortexgraph.core.postings import index_terms, index_text
from cortexgraph.core.segments import SEGMENT, decode_block, segment_of_key, span
from cortexgraph.core.signals import AttrsRow, attrs_key
from cortexgraph.core.text import bm25_scores, term_counts
from cortexgraph.embed import HashEmbedder
from cortexgraph.vector.hnsw import VectorIndex

T0 = 1_700_000_000_000
WORDS = ["deploy", "pipeline", "window", "lunch", "python", "rust", "cache", "index", "merge",
         "review", "friday", "release", "database", "backup", "token"]
SCRIPTS = Path(__file__).parent / "scripts"

_texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)


def live_terms(txn: Any) -> dict[bytes, dict[str, int]]:
    """Every memory's live postings (term -> tf), read block by block from the segments,
    a posting being live iff the memory's index seq lies in its segment's range; a
    memory holding one term twice would fail."""
    found: dict[bytes, dict[str, int]] = {}
    for key, value in txn.iter_items("postings", SEGMENT):
        level, first = segment_of_key(bytes(key))
        block = decode_block(bytes(value), bytes(key[10:]))
        at = 0
        for term, count in zip(block.terms, block.counts.tolist(), strict=True):
            for i in range(at, at + count):
                memory_id = block.ids[i].tobytes()
                row = AttrsRow.decode(txn.get("salience", attrs_key(memory_id)))
                if first <= row.index_seq < first + span(level):
                    terms = found.setdefault(memory_id, {})
                    assert term.decode() not in terms
                    terms[term.decode()] = int(block.tf[i])
            at += count
    return found


def reference_bm25(cx: cg.Cortex, text: str, where: Any = None) -> list[tuple[bytes, float]]:
    """BM25 over every active memory's indexed text, computed from resolved records with
    ``core.text.bm25_scores`` (shares no code with the store's postings or columns)."""
    postings: dict[str, dict[bytes, int]] = {}
    lengths: dict[bytes, int] = {}
    for entry in cx.journal():
        if entry.op != "write":
            continue
        record = cx.resolve(entry.fields["id"].hex())
        if record.status != "active":
            continue
        counts = term_counts(index_text(record.memory))
        lengths[record.uri.id] = sum(counts.values())
        for term, tf in counts.items():
            postings.setdefault(term, {})[record.uri.id] = tf
    if not lengths:
        return []
    avg = sum(lengths.values()) / len(lengths)
    scores = bm25_scores(list(term_counts(text)), postings, lengths, len(lengths), avg,
                         RECALL_BM25)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


@settings(max_examples=40)
@given(
    docs=st.lists(st.tuples(_texts, st.booleans()), min_size=1, max_size=20),
    updates=st.lists(st.tuples(st.integers(0, 19), _texts), max_size=5),
    query=_texts,
    k=st.integers(1, 25),
)
def test_keyword_recall_equals_brute_force_bm25(
    docs: list[tuple[str, bool]], updates: list[tuple[int, str]], query: str, k: int
) -> None:
    """After random writes, updates and tombstones, keyword recall returns exactly the top
    k of a brute-force BM25 over every active memory (scores equal, ties by id), and every
    memory's live postings are exactly its head version's terms iff it is active (K1)."""
    root = Path(tempfile.mkdtemp())
    try:
        with cg.open(root, "agent", sync=False) as cx:
            uris = [cx.write(cg.Fact(text=text), at=T0) for text, _ in docs]
            for i, text in updates:
                if i < len(uris):
                    cx.update(uris[i], text=text + " updated", at=T0 + 1)
            for uri, (_, dead) in zip(uris, docs, strict=True):
                if dead:
                    cx.tombstone(uri, at=T0 + 2)
            expected = reference_bm25(cx, query)[:k]
            result = cx.recall(query, k=k, mode="keyword", now=T0)
            assert [hit.uri.id for hit in result] == [memory_id for memory_id, _ in expected]
            for hit, (_, score) in zip(result, expected, strict=True):
                assert hit.scores["keyword"] == pytest.approx(score, rel=1e-12)
                assert hit.ranks["keyword"] == result.hits.index(hit) + 1
            with cx._env.read() as txn:
                live = live_terms(txn)
                for uri in uris:
                    record = cx.resolve(uri.id.hex())
                    if record.status == "active":
                        assert live.get(uri.id, {}) == index_terms(record.memory)
                    else:
                        assert uri.id not in live
    finally:
        shutil.rmtree(root)


def test_filters_tombstones_and_late_binding(cx: cg.Cortex) -> None:
    """``where`` limits every mode; tombstoned memories never come back; late binding
    journals the access of exactly the hits, the default journals nothing."""
    a = cx.write(cg.Fact(text="deploy through the pipeline"), ns="ops")
    b = cx.write(cg.Event(text="the deploy failed on friday"), ns="ops")
    c = cx.write(cg.Fact(text="deploy docs live in the wiki"), ns="docs")
    assert c in cx.recall("deploy docs wiki", mode="vector").uris  # now indexed
    cx.tombstone(c)
    for mode in ("keyword", "vector", "hybrid"):
        assert set(cx.recall("deploy", mode=mode).uris) <= {a, b}
        only = cx.recall("deploy", mode=mode, where=cg.Q.type(cg.Event))
        assert [u.id for u in only.uris] == [b.id]
        assert cx.recall("deploy", mode=mode, where=cg.Q.ns("docs")).uris == []
    seq = cx.seq
    cx.recall("deploy", k=1)
    assert cx.seq == seq
    hit = cx.recall("deploy", k=1, late_binding=True)
    assert [(e.op, e.fields["ids"]) for e in cx.journal(since=seq)] == [
        ("access", [hit.uris[0].id])
    ]


def test_a_selective_filter_is_answered_by_exact_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter passing few memories is answered by exact search over them; a broad one
    by the filtered graph search. On a store this small the graph search is exact too, so
    the two give the same hits; both pass only memories the filter passes."""
    import cortexgraph.recall as recall_module

    with cg.open(tmp_path, "a", sync=False) as cx:
        for i in range(400):
            kind = cg.Preference if i % 40 == 0 else cg.Fact
            cx.write(kind(text=f"{WORDS[i % 15]} {WORDS[(i * 7) % 15]} note {i}"), at=T0)
        where = cg.Q.type(cg.Preference)
        assert recall_module.exact_filter_limit(400) >= 10  # so: exact over the 10
        answers = {}
        for limit in (None, 0):  # the default (exact over 10 rows); the graph search
            if limit is not None:
                monkeypatch.setattr(recall_module, "exact_filter_limit", lambda live: 0)
            answers[limit] = [
                cx.recall(w, k=5, mode=mode, where=where, now=T0).uris
                for w in WORDS
                for mode in ("vector", "hybrid")
            ]
        assert answers[0] == answers[None]
        preferences = {u.id for u in cx.find(where, limit=100, now=T0).uris}
        assert len(preferences) == 10
        assert all({u.id for u in uris} <= preferences for uris in answers[0])
        assert all(len(uris) == 5 for uris in answers[0])


def test_vector_hits_survive_a_renumbering_of_the_column_index(tmp_path: Path) -> None:
    """Vector labels are mapped to column-index rows once and kept; a rebuild of the column
    index numbers rows afresh (in id order, not write order), and recall on the same handle
    must still name the same memories, scored the same way."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        texts = [f"note {word} about the deploy" for word in ("alpha", "beta", "gamma", "delta")]
        texts += ["a recipe for bread", "the cat sleeps", "release train schedule"]
        cx.write(cg.Fact(text=texts[0]), at=T0)
        cx.recall("deploy", k=1, mode="vector", now=T0)  # the column index is built here
        for i, text in enumerate(texts[1:], start=1):  # then these rows are appended
            cx.write(cg.Fact(text=text), at=T0 + i)
        before = cx.recall("deploy note", k=5, mode="vector", now=T0 + 10)
        appended = cx._column_index().ids
        assert appended != sorted(appended)  # so a build will number them differently
        cx._column_index().seq = -1  # the next refresh builds the index afresh
        after = cx.recall("deploy note", k=5, mode="vector", now=T0 + 10)
        assert after.uris == before.uris
        assert [(h.score, h.salience) for h in after] == [(h.score, h.salience) for h in before]
        assert [h.record.memory.text for h in after] == [h.record.memory.text for h in before]
        written = cx.write(cg.Fact(text="one more deploy note"), at=T0 + 20)
        assert written in cx.recall("one more deploy note", k=3, mode="vector").uris


def test_expansion_lifts_neighbours_and_source_of_attaches_code(cx: cg.Cortex) -> None:
    """In hybrid mode a 1-hop neighbour of a hit that neither channel found is returned via
    that hit at 0.7 of its score; an ArtifactRef linked by source_of is attached to the
    Fact it describes, not returned as a neighbour."""
    fact = cx.write(cg.Fact(text="the retry helper backs off exponentially"))
    near = cx.write(cg.Pattern(text="wrap flaky network calls"))
    code = cx.write(
        cg.ArtifactRef(text="retry.py", path="src/retry.py", content="def retry(): ...")
    )
    cx.add_edge(fact, near, "relates_to")
    cx.add_edge(code, fact, "source_of")
    result = cx.recall("retry helper exponential backoff", k=5, mode="hybrid")
    by_id = {hit.uri.id: hit for hit in result}
    top = result[0]
    assert top.uri.id == fact.id
    assert [r.uri.id for r in top.attached] == [code.id]
    lifted = by_id[near.id]
    assert lifted.via is not None and lifted.via.id == fact.id
    assert lifted.score == pytest.approx(0.7 * top.score)
    no_expansion = cx.recall("retry helper exponential backoff", k=5, expand=False)
    assert near.id not in {hit.uri.id for hit in no_expansion} or (
        no_expansion[[h.uri.id for h in no_expansion].index(near.id)].via is None
    )


def test_fusion_and_expansion_functions() -> None:
    """Score fusion scales each channel to 0..1 and averages; RRF sums 1/(60 + rank);
    expansion takes the max of own score and 0.7 x the hit's, without cascading."""
    fused = fuse_scores({"keyword": {1: 10.0, 2: 5.0, 3: 0.0}, "vector": {2: 0.9, 4: 0.5}})
    assert fused == {1: 0.5, 2: 0.75, 3: 0.0, 4: 0.0}
    assert fuse({"keyword": [1, 2], "vector": [2]}) == {
        1: 1 / 61, 2: 1 / 62 + 1 / 61}
    raised = expand({1: 1.0, 2: 0.9, 3: 0.5}, [1, 2], {1: [3, 4], 2: [4], 4: [5]})
    assert raised == {3: (0.7, 1), 4: (0.7, 1)}
    assert embed_text(cg.Event(text="hi", speaker="Ann"), "chat") == "[event] [chat] Ann: hi"


def test_embedder_is_recorded_and_a_different_one_is_refused(tmp_path: Path) -> None:
    """The embedder's name and dimension are recorded at creation; opening with another
    is a ValidationError naming ``embedder`` unless reembed=True, which switches to it and
    builds its own index."""
    with cg.open(tmp_path, "a", embedder=HashEmbedder(64)) as cx:
        cx.write(cg.Fact(text="alpha beta"))
        assert cx.recall("alpha", mode="vector").uris
    with cg.open(tmp_path, "a") as cx:
        assert cx.embedder.name == "hash-v1-64"
    with pytest.raises(cg.ValidationError) as info:
        cg.open(tmp_path, "a", embedder=HashEmbedder(128))
    assert info.value.field == "embedder"
    with cg.open(tmp_path, "a", embedder=HashEmbedder(128), reembed=True) as cx:
        assert cx.embedder.name == "hash-v1-128"
        assert cx.recall("alpha", mode="vector").uris
    with cg.open(tmp_path, "a") as cx:
        assert cx.embedder.dim == 128


def test_deleting_the_index_restores_identical_results(tmp_path: Path) -> None:
    """Deleting the vector index files and reopening rebuilds an index (from the emb
    cache) that gives identical results."""
    with cg.open(tmp_path, "a", sync=False) as cx:
        for i in range(300):
            cx.write(cg.Fact(text=f"{WORDS[i % 15]} {WORDS[(i * 7) % 15]} note {i}"), at=T0)
        before = [cx.recall(w, k=10, mode="vector").uris for w in WORDS]
    shutil.rmtree(tmp_path / "a" / "vectors")
    with cg.open(tmp_path, "a") as cx:
        after = [cx.recall(w, k=10, mode="vector").uris for w in WORDS]
        assert cx._vector_state().index.status in ("missing", "new")
    assert after == before


def _run_recall_writer_until(root: Path, event: str, count: int) -> list[str]:
    """Start ``scripts/recall_writer.py`` on ``root``, SIGKILL it as soon as it has printed
    its ``count``-th ``event`` line, and return every line it printed before the kill.

    Fails if the writer exits by itself, or if it died of anything but the SIGKILL."""
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPTS / "recall_writer.py"), str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    seen = 0
    while seen < count:
        line = proc.stdout.readline()
        if not line:  # the writer exited (or closed its output) before the aimed point
            proc.wait()
            raise AssertionError(
                f"the writer stopped after {lines[-3:]}, exit code {proc.returncode}:"
                f" {proc.stderr.read()}"
            )
        lines.append(line.strip())
        seen += lines[-1].split()[0] == event
    exited = proc.poll() is not None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stderr = proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert not exited, f"the writer exited by itself: {stderr}"
    assert proc.returncode == -signal.SIGKILL, f"exit code {proc.returncode}: {stderr}"
    return lines


@pytest.mark.slow
@pytest.mark.parametrize(
    ("event", "count"),
    [
        pytest.param("saving", 2, id="inside-the-second-index-save"),
        pytest.param("saved", 1, id="right-after-the-first-index-save"),
        pytest.param("batch", 27, id="between-saves-after-27-batches"),
    ],
)
def test_sigkill_during_writes_leaves_index_and_postings_agreeing(
    tmp_path: Path, event: str, count: int
) -> None:
    """A writer that writes batches and recalls, saving the vector index every tenth
    batch, is killed with SIGKILL at a point named by its own progress lines: while it
    saves the index, right after a save, or between saves. The test checks that it died
    of the signal, that every batch it reported is in the store and that the index on disk
    reflects at least its last completed save; then that keyword and vector results on
    reopen equal those of a fresh index, and the postings survive a rebuild byte for byte."""
    lines = _run_recall_writer_until(tmp_path, event, count)
    reported = [int(line.split()[3]) for line in lines if line.startswith("batch ")]
    saved = [int(line.split()[1]) for line in lines if line.startswith("saved ")]
    assert len(reported) >= 10 and saved, f"the kill came before a save: {lines[-3:]}"
    on_disk = VectorIndex.saved_watermark(tmp_path / "a" / "vectors", name=HashEmbedder().name)
    assert on_disk is not None and on_disk >= saved[-1] > 0
    with cg.open(tmp_path, "a") as cx:
        assert cx.seq >= reported[-1]  # nothing the writer saw commit was lost
        assert cx._vector_state().index.watermark >= on_disk  # the saved index was loaded
        queries = WORDS[:6]
        got = [(cx.recall(q, k=10, mode="vector").uris, cx.recall(q, k=10, mode="keyword").uris)
               for q in queries]
        digests = cx.table_digests()
        cx.rebuild()
        assert cx.table_digests()["postings"] == digests["postings"]
    shutil.rmtree(tmp_path / "a" / "vectors")
    with cg.open(tmp_path, "a") as cx:
        fresh = [(cx.recall(q, k=10, mode="vector").uris,
                  cx.recall(q, k=10, mode="keyword").uris) for q in queries]
    assert got == fresh


def test_hash_embedder_recall_is_deterministic_across_processes(tmp_path: Path) -> None:
    """The same store and query give the same hybrid ranking in two processes with
    different PYTHONHASHSEED (the default embedder is bit-exact)."""
    script = (
        "import sys, cortexgraph as cg\n"
        "with cg.open(sys.argv[1], 'a', sync=False) as cx:\n"
        "    if not cx.seq:\n"
        "        for i in range(50):\n"
        f"            words = {WORDS!r}\n"
        "            cx.write(cg.Fact(text=' '.join(words[j % 15] for j in range(i, i+4))),at=1)\n"
        "    print([str(u) for u in cx.recall('deploy pipeline cache', k=10, now=5).uris])\n"
    )
    outs = []
    for seed in ("0", "4242"):
        shutil.rmtree(tmp_path / "a" / "vectors", ignore_errors=True)
        out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True,
                             capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        outs.append(out)
    assert outs[0] == outs[1] and "cx://" in outs[0]


def test_bad_recall_arguments(cx: cg.Cortex) -> None:
    """Bad arguments raise ValidationError naming the field and journal nothing."""
    cx.write(cg.Fact(text="x"))
    for kwargs, field in [({"k": 0}, "k"), ({"mode": "fuzzy"}, "mode"),
                          ({"fusion": "max"}, "fusion"), ({"where": "fact"}, "where")]:
        with pytest.raises(cg.ValidationError) as info:
            cx.recall("x", **kwargs)
        assert info.value.field == field
    with pytest.raises(cg.ValidationError) as info:
        cx.recall("   ")
    assert info.value.field == "text"
    assert np.isfinite(cx.recall("x")[0].score)


def test_salience_breaks_ties_in_every_mode(cx: cg.Cortex) -> None:
    """Two memories with the same text score the same in every channel; the more salient
    (higher priority) comes first whatever the ids, and a distinct score still wins."""
    first = cx.write(cg.Fact(text="rotate the signing keys monthly", priority=2), at=T0)
    second = cx.write(cg.Fact(text="rotate the signing keys monthly", priority=2), at=T0)
    # make the one with the larger id the more salient, so that id order would be wrong
    low, high = sorted((first, second), key=lambda uri: uri.id)
    cx.update(high, priority=9, at=T0)
    cx.write(cg.Fact(text="signing keys live in the vault", priority=10), at=T0)
    for mode in ("keyword", "vector", "hybrid"):
        hits = cx.recall("rotate signing keys monthly", k=3, mode=mode, now=T0)
        ids = [hit.uri.id for hit in hits]
        assert ids[:2] == [high.id, low.id], mode
        assert hits[0].score == hits[1].score > hits[2].score, mode
        assert hits[0].salience > hits[1].salience, mode


def test_recall_hits_equal_hits_built_through_attrs(cx: cg.Cortex) -> None:
    """recall builds its hits by setting slots directly; each equals the RecallHit attrs'
    own __init__ makes from the same fields, in every mode."""
    import attrs

    from cortexgraph.recall import RecallHit

    fact = cx.write(cg.Fact(text="the retry helper backs off exponentially"), at=T0)
    code = cx.write(cg.ArtifactRef(text="retry.py", path="src/retry.py", content="..."), at=T0)
    cx.add_edge(code, fact, "source_of", at=T0)
    cx.write(cg.Event(text="the retry helper failed on friday"), at=T0)
    for mode in ("keyword", "vector", "hybrid"):
        for hit in cx.recall("retry helper", k=5, mode=mode, now=T0):
            again = RecallHit(**attrs.asdict(hit, recurse=False))
            assert hit == again
            assert attrs.asdict(hit, recurse=False) == attrs.asdict(again, recurse=False)
