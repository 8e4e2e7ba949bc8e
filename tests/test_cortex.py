"""The facade verbs: versions, heads, tombstones, indexes, the journal feed, ids."""

from __future__ import annotations

import hashlib
import struct

import blake3
import pytest

import cortexgraph as cg
from cortexgraph.core.codec import encode

T0 = 1_700_000_000_000  # the `clock` fixture starts here


def test_write_resolve_roundtrip(cx: cg.Cortex, clock: cg.ManualClock) -> None:
    """write returns a URI pinned to version 1; resolve returns the normalised memory
    with its place in the store; `at` defaults to the injected clock."""
    uri = cx.write(cg.Fact(text="Cafe\u0301 opens at 9", tags=["Food", "food", "city"]))
    assert uri.version == 1 and uri.actor == "agent" and uri.ns == "default"
    rec = cx.resolve(uri)
    assert rec.memory == cg.Fact(text="Café opens at 9", tags=["city", "food"])
    assert rec.memory.tags == ("city", "food")
    assert (rec.version, rec.head, rec.latest, rec.seq) == (1, 1, 1, 1)
    assert rec.status == "active" and rec.at == rec.created_at == T0
    assert rec.uri == uri and rec.is_head


def test_resolve_accepts_every_reference_form(cx: cg.Cortex) -> None:
    """A MemoryURI, its string, the unpinned URI, the 16-byte id and its hex all resolve."""
    uri = cx.write(cg.Fact(text="x"), ns="work")
    for ref in (uri, str(uri), uri.head, str(uri.head), uri.id, uri.id_hex):
        assert cx.resolve(ref).uri == uri


def test_id_is_the_documented_hash(cx: cg.Cortex) -> None:
    """id = BLAKE3("cortexgraph/id/v1" | u16 len actor | actor | u16 len ns | ns | u64 seq |
    canonical body)[:16], computed here independently from docs/internals.md."""
    memory = cg.Fact(text="deploys go through CI", tags=["deploy"], confidence=0.5)
    cx.write(cg.Fact(text="first"), at=1)
    uri = cx.write(memory, ns="ops", at=2)
    body = encode(
        {"type": "fact", "text": memory.text, "tags": ["deploy"], "confidence": 0.5, "priority": 5}
    )
    data = (
        b"cortexgraph/id/v1"
        + struct.pack(">H", 5)
        + b"agent"
        + struct.pack(">H", 3)
        + b"ops"
        + struct.pack(">Q", 2)
        + body
    )
    assert uri.id == blake3.blake3(data).digest()[:16]


def test_update_creates_versions_and_moves_the_head(cx: cg.Cortex) -> None:
    """update writes version latest+1 from the head; old versions stay resolvable;
    history lists every version."""
    v1 = cx.write(cg.Goal(text="ship", priority=3))
    v2 = cx.update(v1, expected_version=1, text="ship v1", at=T0 + 10)
    v3 = cx.update(v2.head, status="achieved", at=T0 + 20)
    assert [u.version for u in (v1, v2, v3)] == [1, 2, 3]
    head = cx.resolve(v1.head)
    assert head.version == 3 and head.memory == cg.Goal(
        text="ship v1", priority=3, status="achieved"
    )
    assert cx.resolve(v1).memory.text == "ship" and not cx.resolve(v1).is_head
    assert [r.memory.text for r in cx.history(v1)] == ["ship", "ship v1", "ship v1"]
    assert [r.at for r in cx.history(v1)] == [T0, T0 + 10, T0 + 20]


def test_identical_update_journals_nothing(cx: cg.Cortex) -> None:
    """An update that leaves the memory as it is returns the head URI and journals nothing
    (tags given in another order and case are the same tags)."""
    uri = cx.write(cg.Fact(text="x", tags=["a", "b"]))
    before = cx.table_digests()
    assert cx.update(uri, tags=["B", "a"], text="x") == uri
    assert cx.table_digests() == before


def test_update_head_moves_the_indexes(cx: cg.Cortex) -> None:
    """Tag filters and keyword recall follow the head: an update to new tags replaces
    them, update_head back restores the old ones."""
    uri = cx.write(cg.Fact(text="x", tags=["old"]), at=T0)
    cx.update(uri, tags=["new"], at=T0 + 5)
    assert [r.uri.id for r in cx.find(cg.Q.tag("new"), limit=5)] == [uri.id]
    assert not cx.find(cg.Q.tag("old"), limit=5)
    assert [h.uri.id for h in cx.recall("new", mode="keyword").hits] == [uri.id]
    cx.update_head(uri, version=1, at=T0 + 9)
    assert [r.uri.id for r in cx.find(cg.Q.tag("old"), limit=5)] == [uri.id]
    assert not cx.find(cg.Q.tag("new"), limit=5) and not cx.recall("new", mode="keyword").hits
    assert cx.resolve(uri.head).version == 1 and cx.resolve(uri.head).latest == 2
    # updating from an older head writes version 3 based on version 1
    v3 = cx.update(uri, text="y")
    assert v3.version == 3 and cx.resolve(v3).memory.tags == ("old",)


def test_update_head_to_the_current_head_is_a_no_op(cx: cg.Cortex) -> None:
    """Moving the head where it already is journals nothing."""
    uri = cx.write(cg.Fact(text="x"))
    seq = cx.seq
    assert cx.update_head(uri.id_hex, version=1) == uri
    assert cx.seq == seq


def test_tombstone_keeps_history_and_blocks_changes(cx: cg.Cortex) -> None:
    """J5: a tombstoned memory cannot change; every version still resolves, marked
    tombstoned, and a status filter finds it."""
    uri = cx.write(cg.Preference(text="tabs"))
    cx.update(uri, text="spaces")
    cx.tombstone(uri, reason="team decided")
    for ref in (uri, uri.at_version(2), uri.head):
        assert cx.resolve(ref).status == "tombstoned"
    assert cx.resolve(uri).memory.text == "tabs"
    tombstoned = cx.find(cg.Q.type("preference") & cg.Q.status("tombstoned"), limit=5)
    assert [r.uri.id for r in tombstoned] == [uri.id]
    with pytest.raises(cg.TombstonedError):
        cx.update(uri, text="x")


def test_journal_feed(cx: cg.Cortex) -> None:
    """journal(since=) yields every later entry in order with its op and fields."""
    a = cx.write(cg.Fact(text="a"), at=1)
    cx.update(a, text="b", at=2)
    cx.update_head(a, version=1, at=3)
    cx.tombstone(a, reason="done", at=4)
    entries = list(cx.journal())
    assert [(e.seq, e.at, e.op) for e in entries] == [
        (1, 1, "write"),
        (2, 2, "update"),
        (3, 3, "head"),
        (4, 4, "tombstone"),
    ]
    assert all(e.ns == "default" and e.fields["id"] == a.id for e in entries)
    assert entries[0].fields["body"] == {
        "type": "fact",
        "text": "a",
        "confidence": 1.0,
        "priority": 5,
    }
    assert entries[1].fields["version"] == 2 and entries[2].fields["version"] == 1
    assert entries[3].fields["reason"] == "done"
    assert [e.seq for e in cx.journal(since=2)] == [3, 4]
    assert list(cx.journal(since=4)) == []
    assert [seq for seq, _ in cx.journal_bytes(since=1)] == [2, 3, 4]


def test_journal_feed_spans_chunks(cx: cg.Cortex) -> None:
    """The feed reads in chunks; a journal longer than one chunk comes out whole."""
    with cx.batch() as b:
        for i in range(1100):
            b.write(cg.Event(text=f"e{i}"), at=i)
    assert [e.seq for e in cx.journal(since=3)] == list(range(4, 1101))


def test_journal_since_at_or_past_the_end_yields_nothing(cx: cg.Cortex) -> None:
    """``since`` may be any non-negative integer: at or past the journal's end, however
    large (beyond the u64 seq keys too), both feeds yield nothing instead of failing."""
    cx.write(cg.Fact(text="a"), at=1)
    cx.write(cg.Fact(text="b"), at=2)
    for since in (2, 3, 2**63, 2**64 - 2, 2**64 - 1, 2**64, 10**23):
        assert list(cx.journal(since=since)) == [], since
        assert list(cx.journal_bytes(since=since)) == [], since
    assert [seq for seq, _ in cx.journal_bytes(since=1)] == [2]


@pytest.mark.parametrize("feed", ["journal", "journal_bytes"])
def test_journal_feeds_hold_no_read_between_yields(
    cx: cg.Cortex, monkeypatch: pytest.MonkeyPatch, feed: str
) -> None:
    """Both feeds read in chunks, each in a read transaction that has ended before its
    entries are yielded: a paused feed holds no read (which would keep the map from
    growing), and a long journal takes one read per chunk."""
    with cx.batch() as b:
        for i in range(1100):
            b.write(cg.Event(text=f"e{i}"), at=i)
    live: list[int] = [0]
    opened: list[int] = [0]
    read = cx._env.read

    class Counted:
        def __init__(self) -> None:
            self.ctx = read()

        def __enter__(self) -> object:
            live[0] += 1
            opened[0] += 1
            return self.ctx.__enter__()

        def __exit__(self, *exc: object) -> None:
            live[0] -= 1
            self.ctx.__exit__(*exc)

    monkeypatch.setattr(cx._env, "read", Counted)
    held = [live[0] for _ in getattr(cx, feed)(since=0)]
    assert len(held) == 1100
    assert set(held) == {0}
    assert opened[0] == 3  # 512 + 512 + 76 entries


def test_all_nine_types_store_and_resolve(cx: cg.Cortex) -> None:
    """Each of the nine types writes and resolves to an equal memory."""
    uri = cx.write(cg.Fact(text="f"))
    memories = [
        cg.Goal(text="g", status="blocked", due=T0),
        cg.Preference(text="p", pinned=True),
        cg.Constraint(text="c", source=cg.Source(origin="human", branch="main")),
        cg.Fact(text="f", valid_from=1, valid_to=2, summary="short"),
        cg.Pattern(text="pt", confidence=0.25),
        cg.Event(text="e", channel="chat", occurred_at=T0, agent_id="a1", speaker="Ann"),
        cg.ArtifactRef(
            text="code",
            path="src/x.py",
            media_type="text/x-python",
            content="print(1)\n",
            content_hash="sha256:" + hashlib.sha256(b"print(1)\n").hexdigest(),
        ),
        cg.Attest(cited=[str(uri)], outcome="success", text="worked"),
    ]
    for memory in memories:
        assert cx.resolve(cx.write(memory)).memory == memory
    learned = cx.attest([uri], outcome="success", text="worked")
    assert cx.resolve(learned.learn).memory == cg.LearnWeights(
        weights=learned.after, attest=str(learned.attest)
    )
