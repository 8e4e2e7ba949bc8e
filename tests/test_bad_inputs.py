"""Every bad input raises the typed error that names the problem, and changes nothing.

Each case runs against a store holding a few memories (one of them tombstoned, one with
two versions). Before and after the bad call we take a digest of every LMDB table — the
journal included — and require them byte-identical, and the journal seq unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import cortexgraph as cg
from cortexgraph.core.body import memory_from_body

MIB = 1 << 20


class Store:
    """A populated store and the URIs a case may refer to."""

    def __init__(self, cx: cg.Cortex) -> None:
        self.cx = cx
        self.fact = cx.write(cg.Fact(text="deploys go through CI", tags=["deploy"]))
        self.goal = cx.write(cg.Goal(text="ship v1"), ns="project")
        self.cx.update(self.goal, expected_version=1, text="ship v1 by friday")
        self.dead = cx.write(cg.Constraint(text="never force-push"))
        cx.tombstone(self.dead, reason="obsolete")
        self.attested = cx.attest([self.fact], outcome="success")


def _write_in_batch(s: Store, memory: cg.Memory) -> Any:
    with s.cx.batch() as b:
        b.write(cg.Fact(text="valid, but rolled back with the batch"))
        return b.write(memory)


_WEIGHTS = (450_000, 200_000, 150_000, 100_000, 100_000)


# Each case: (id, callable taking the Store, expected error type, words the message must hold,
# expected ValidationError.field or None).
Case = tuple[str, Callable[[Store], Any], type[Exception], tuple[str, ...], str | None]

CASES: list[Case] = [
    (
        "unknown-field-on-construction",
        lambda s: s.cx.write(cg.Fact(text="x", colour="red")),  # type: ignore[call-arg]
        cg.ValidationError,
        ("unknown field",),
        "colour",
    ),
    (
        "unknown-field-on-update",
        lambda s: s.cx.update(s.fact, colour="red"),
        cg.ValidationError,
        ("unknown field",),
        "colour",
    ),
    (
        "type-is-not-a-field",
        lambda s: s.cx.update(s.fact, type="goal"),
        cg.ValidationError,
        ("unknown field",),
        "type",
    ),
    (
        "wrong-type-text",
        lambda s: s.cx.write(cg.Fact(text=123)),  # type: ignore[arg-type]
        cg.ValidationError,
        ("string",),
        "text",
    ),
    (
        "wrong-type-priority-on-update",
        lambda s: s.cx.update(s.fact, priority="high"),
        cg.ValidationError,
        ("integer",),
        "priority",
    ),
    (
        "bool-is-not-a-priority",
        lambda s: s.cx.write(cg.Fact(text="x", priority=True)),
        cg.ValidationError,
        ("integer",),
        "priority",
    ),
    (
        "nan-confidence",
        lambda s: s.cx.write(cg.Fact(text="x", confidence=float("nan"))),
        cg.ValidationError,
        ("finite",),
        "confidence",
    ),
    (
        "inf-confidence",
        lambda s: s.cx.update(s.fact, confidence=float("inf")),
        cg.ValidationError,
        ("finite",),
        "confidence",
    ),
    (
        "text-over-1-mib",
        lambda s: s.cx.write(cg.Fact(text="a" * (MIB + 1))),
        cg.ValidationError,
        ("1048576 bytes",),
        "text",
    ),
    (
        "text-over-1-mib-in-multibyte-characters",
        lambda s: s.cx.write(cg.Fact(text="é" * (MIB // 2 + 1))),
        cg.ValidationError,
        ("1048576 bytes",),
        "text",
    ),
    (
        "invalid-utf8-lone-surrogate",
        lambda s: s.cx.write(cg.Fact(text="bad \ud800 text")),
        cg.ValidationError,
        ("UTF-8",),
        "text",
    ),
    (
        "empty-text",
        lambda s: s.cx.write(cg.Fact(text="   ")),
        cg.ValidationError,
        ("empty",),
        "text",
    ),
    (
        "priority-0",
        lambda s: s.cx.write(cg.Fact(text="x", priority=0)),
        cg.ValidationError,
        ("between 1 and 10",),
        "priority",
    ),
    (
        "priority-11",
        lambda s: s.cx.update(s.fact, priority=11),
        cg.ValidationError,
        ("between 1 and 10",),
        "priority",
    ),
    (
        "confidence-1.5",
        lambda s: s.cx.write(cg.Fact(text="x", confidence=1.5)),
        cg.ValidationError,
        ("between 0 and 1",),
        "confidence",
    ),
    (
        "unknown-type-in-body",
        lambda s: memory_from_body({"type": "opinion", "text": "x"}),
        cg.ValidationError,
        ("unknown memory type",),
        "type",
    ),
    (
        "not-a-memory",
        lambda s: s.cx.write({"type": "fact", "text": "x"}),  # type: ignore[arg-type]
        cg.ValidationError,
        ("nine memory types",),
        "memory",
    ),
    (
        "tags-as-a-string",
        lambda s: s.cx.write(cg.Fact(text="x", tags="deploy")),  # type: ignore[arg-type]
        cg.ValidationError,
        ("list of strings",),
        "tags",
    ),
    (
        "tag-with-whitespace",
        lambda s: s.cx.write(cg.Fact(text="x", tags=["two words"])),
        cg.ValidationError,
        ("whitespace",),
        "tags",
    ),
    (
        "valid-to-before-valid-from",
        lambda s: s.cx.write(cg.Fact(text="x", valid_from=10, valid_to=5)),
        cg.ValidationError,
        ("before valid_from",),
        "valid_to",
    ),
    (
        "summary-with-newline",
        lambda s: s.cx.write(cg.Fact(text="x", summary="one\ntwo")),
        cg.ValidationError,
        ("single line",),
        "summary",
    ),
    (
        "bad-content-hash",
        lambda s: s.cx.write(cg.ArtifactRef(text="x", content_hash="md5:abc")),
        cg.ValidationError,
        ("sha256",),
        "content_hash",
    ),
    (
        "content-hash-not-matching-content",
        lambda s: s.cx.write(
            cg.ArtifactRef(text="x", content="print(1)", content_hash="sha256:" + "0" * 64)
        ),
        cg.ValidationError,
        ("does not match the content",),
        "content_hash",
    ),
    (
        "attest-without-citations",
        lambda s: s.cx.write(cg.Attest(cited=[], outcome="success")),
        cg.ValidationError,
        ("at least one",),
        "cited",
    ),
    (
        "attest-citing-a-non-uri",
        lambda s: s.cx.write(cg.Attest(cited=["nope"], outcome="success")),
        cg.ValidationError,
        ("'nope' is not a memory URI",),
        "cited",
    ),
    (
        "attest-citing-an-unpinned-uri",
        lambda s: s.cx.write(cg.Attest(cited=[str(s.fact.head)], outcome="success")),
        cg.ValidationError,
        ("not pinned to a version",),
        "cited",
    ),
    (
        "attest-citing-another-actors-memory",
        lambda s: s.cx.write(
            cg.Attest(cited=[f"cx://bob/default/{s.fact.id_hex}@1"], outcome="success")
        ),
        cg.ValidationError,
        ("actor 'bob'",),
        "cited",
    ),
    (
        "attest-citing-a-missing-memory",
        lambda s: s.cx.write(
            cg.Attest(cited=[f"cx://agent/default/{'ab' * 16}@1"], outcome="success")
        ),
        cg.ValidationError,
        ("names no memory of this store",),
        "cited",
    ),
    (
        "attest-citing-the-wrong-namespace",
        lambda s: s.cx.write(
            cg.Attest(cited=[f"cx://agent/project/{s.fact.id_hex}@1"], outcome="success")
        ),
        cg.ValidationError,
        ("names no memory of this store",),
        "cited",
    ),
    (
        "attest-citing-a-missing-version",
        lambda s: s.cx.write(cg.Attest(cited=[str(s.goal.at_version(3))], outcome="failure")),
        cg.ValidationError,
        ("version 3, but the latest is 2",),
        "cited",
    ),
    (
        "attest-citing-a-non-uri-in-a-batch",
        lambda s: _write_in_batch(s, cg.Attest(cited=["nope"], outcome="success")),
        cg.ValidationError,
        ("not a memory URI",),
        "cited",
    ),
    (
        "attest-updated-to-cite-a-non-uri",
        lambda s: s.cx.update(s.attested.attest, cited=["nope"]),
        cg.ValidationError,
        ("not a memory URI",),
        "cited",
    ),
    (
        "attest-verb-citing-a-missing-version",
        lambda s: s.cx.attest([s.fact.at_version(2)], outcome="success"),
        cg.NotFoundError,
        ("no version 2",),
        None,
    ),
    (
        "learn-weights-written-directly",
        lambda s: s.cx.write(cg.LearnWeights(weights=_WEIGHTS)),
        cg.ValidationError,
        ("cannot be written or updated directly", "cx.attest("),
        "memory",
    ),
    (
        "learn-weights-written-in-a-batch",
        lambda s: _write_in_batch(s, cg.LearnWeights(weights=_WEIGHTS)),
        cg.ValidationError,
        ("cx.attest(",),
        "memory",
    ),
    (
        "learn-weights-updated",
        lambda s: s.cx.update(s.attested.learn, weights=_WEIGHTS),
        cg.ValidationError,
        ("cannot be written or updated directly",),
        "memory",
    ),
    (
        "journal-since-negative",
        lambda s: next(s.cx.journal(since=-1)),
        cg.ValidationError,
        ("non-negative integer",),
        "since",
    ),
    (
        "journal-bytes-since-not-an-integer",
        lambda s: next(s.cx.journal_bytes(since=1.0)),  # type: ignore[arg-type]
        cg.ValidationError,
        ("non-negative integer",),
        "since",
    ),
    (
        "weights-not-summing-to-a-million",
        lambda s: s.cx.write(cg.LearnWeights(weights=(1, 2, 3, 4, 5))),
        cg.ValidationError,
        ("sum to 1000000",),
        "weights",
    ),
    (
        "bad-origin",
        lambda s: s.cx.write(cg.Fact(text="x", source=cg.Source(origin="robot"))),
        cg.ValidationError,
        ("human",),
        "origin",
    ),
    (
        "bad-namespace",
        lambda s: s.cx.write(cg.Fact(text="x"), ns="Project Space"),
        cg.ValidationError,
        ("not a valid name",),
        "ns",
    ),
    (
        "negative-at",
        lambda s: s.cx.write(cg.Fact(text="x"), at=-1),
        cg.ValidationError,
        ("milliseconds",),
        "at",
    ),
    (
        "float-at",
        lambda s: s.cx.update(s.fact, text="y", at=1.5),
        cg.ValidationError,
        ("milliseconds",),
        "at",
    ),
    (
        "latest-fragment-uri",
        lambda s: s.cx.resolve(str(s.fact.head) + "#latest"),
        cg.URIError,
        ("fragment",),
        "uri",
    ),
    (
        "fragment-uri-on-update",
        lambda s: s.cx.update(str(s.fact) + "#x", text="y"),
        cg.URIError,
        ("fragment",),
        "uri",
    ),
    (
        "malformed-uri",
        lambda s: s.cx.resolve("cx://agent/default/not-hex"),
        cg.URIError,
        ("32 lowercase hex",),
        "uri",
    ),
    (
        "uri-version-with-leading-zero",
        lambda s: s.cx.resolve(str(s.fact.head) + "@01"),
        cg.URIError,
        ("leading zeros",),
        "uri",
    ),
    (
        "update-of-a-tombstone",
        lambda s: s.cx.update(s.dead, text="revive"),
        cg.TombstonedError,
        ("tombstoned",),
        None,
    ),
    (
        "update-head-of-a-tombstone",
        lambda s: s.cx.update_head(s.dead, version=1),
        cg.TombstonedError,
        ("tombstoned",),
        None,
    ),
    (
        "tombstone-twice",
        lambda s: s.cx.tombstone(s.dead),
        cg.TombstonedError,
        ("tombstoned",),
        None,
    ),
    (
        "stale-expected-version",
        lambda s: s.cx.update(s.goal, expected_version=1, text="late edit"),
        cg.VersionConflictError,
        ("version 2, not 1",),
        None,
    ),
    (
        "expected-version-zero",
        lambda s: s.cx.update(s.goal, expected_version=0, text="x"),
        cg.ValidationError,
        ("positive",),
        "expected_version",
    ),
    (
        "update-without-changes",
        lambda s: s.cx.update(s.fact),
        cg.ValidationError,
        ("at least one field",),
        "changes",
    ),
    (
        "update-head-to-missing-version",
        lambda s: s.cx.update_head(s.goal, version=3),
        cg.NotFoundError,
        ("no version 3",),
        None,
    ),
    (
        "resolve-missing-version",
        lambda s: s.cx.resolve(s.fact.at_version(2)),
        cg.NotFoundError,
        ("no version 2",),
        None,
    ),
    (
        "resolve-unknown-id",
        lambda s: s.cx.resolve("cx://agent/default/" + "0" * 32),
        cg.NotFoundError,
        ("no memory",),
        None,
    ),
    (
        "uri-of-another-actor",
        lambda s: s.cx.update("cx://someone/default/" + s.fact.id_hex, text="x"),
        cg.NotFoundError,
        ("belongs to actor 'someone'",),
        None,
    ),
    (
        "uri-in-the-wrong-namespace",
        lambda s: s.cx.update(f"cx://agent/other/{s.fact.id_hex}", text="x"),
        cg.NotFoundError,
        ("namespace 'default'",),
        None,
    ),
    (
        "tombstone-reason-not-text",
        lambda s: s.cx.tombstone(s.fact, reason=42),  # type: ignore[arg-type]
        cg.ValidationError,
        ("string",),
        "reason",
    ),
]


@pytest.fixture
def store(tmp_path: Path, clock: cg.ManualClock) -> Any:
    cx = cg.open(tmp_path / "store", "agent", clock=clock, sync=False)
    try:
        yield Store(cx)
    finally:
        cx.close()


def test_there_are_at_least_twenty_distinct_cases() -> None:
    """The bad-input suite covers at least 20 distinct bad inputs, each named once."""
    assert len({case[0] for case in CASES}) == len(CASES) >= 20


@pytest.mark.parametrize(
    ("name", "call", "error", "words", "field"), CASES, ids=[c[0] for c in CASES]
)
def test_bad_input_raises_typed_error_and_changes_nothing(
    store: Store,
    name: str,
    call: Callable[[Store], Any],
    error: type[Exception],
    words: tuple[str, ...],
    field: str | None,
) -> None:
    """The bad call raises exactly the documented error type, its message names the
    problem, ValidationErrors carry the offending field, and no table changes."""
    before = store.cx.table_digests()
    seq = store.cx.seq
    with pytest.raises(error) as caught:
        call(store)
    assert type(caught.value) is error
    message = str(caught.value)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    if field is not None:
        assert isinstance(caught.value, cg.ValidationError)
        assert caught.value.field == field
    assert store.cx.table_digests() == before
    assert store.cx.seq == seq


def test_write_on_read_only_handle(tmp_path: Path, clock: cg.ManualClock) -> None:
    """A read-only handle refuses every mutation with ReadOnlyError and leaves the files
    as they were (digests taken through a fresh writable handle afterwards)."""
    with cg.open(tmp_path, "agent", clock=clock) as cx:
        uri = cx.write(cg.Fact(text="kept"))
        before = cx.table_digests()
    with cg.open(tmp_path, "agent", readonly=True) as ro:
        assert ro.resolve(uri).memory.text == "kept"
        for call in (
            lambda: ro.write(cg.Fact(text="nope")),
            lambda: ro.update(uri, text="nope"),
            lambda: ro.update_head(uri, version=1),
            lambda: ro.tombstone(uri),
        ):
            with pytest.raises(cg.ReadOnlyError, match="read-only"):
                call()
        with pytest.raises(cg.ReadOnlyError), ro.batch():
            pass
    with cg.open(tmp_path, "agent", clock=clock) as cx:
        assert cx.table_digests() == before


@pytest.mark.parametrize(
    "actor", ["", "Agent", "has space", "-leading-dash", "a/b", "..", "x" * 65, "é"]
)
def test_bad_actor_name(tmp_path: Path, actor: str) -> None:
    """Invalid actor names are refused before anything is created on disk."""
    with pytest.raises(cg.ValidationError) as caught:
        cg.open(tmp_path, actor)
    assert caught.value.field == "actor"
    assert list(tmp_path.iterdir()) == []
