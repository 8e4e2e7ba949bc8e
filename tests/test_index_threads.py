"""Threads sharing one handle share its column index: a read must never see the index at a
state other than its own snapshot's.

The interleaving that used to break this is forced with events, not left to chance:
thread A pauses right after bringing the index to its snapshot; meanwhile a write commits
and thread C reads. Had C moved the index on, A would walk rows its own snapshot does not
have (and fail to read them); with the index's read lock, C waits for A.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import cortexgraph as cg
from cortexgraph.core.predicates import Q
from cortexgraph.index import ColumnIndex

T0 = 1_700_000_000_000
WAIT = 10.0  # seconds; only reached if the code under test deadlocks


def _pause_a(monkeypatch: pytest.MonkeyPatch, *, before: bool) -> tuple[threading.Event, ...]:
    """(paused, resume): the first ``ColumnIndex.refresh`` made by a thread named "A" sets
    ``paused`` (before or after it refreshes, holding its snapshot), then waits for
    ``resume``."""
    paused, resume = threading.Event(), threading.Event()
    real = ColumnIndex.refresh

    def pause() -> None:
        if threading.current_thread().name == "A" and not paused.is_set():
            paused.set()
            if not resume.wait(WAIT):
                raise AssertionError("thread A was never resumed")

    def refresh(self: ColumnIndex, txn: Any) -> int:
        if before:
            pause()
        seq = real(self, txn)
        if not before:
            pause()
        return seq

    monkeypatch.setattr(ColumnIndex, "refresh", refresh)
    return paused, resume


@pytest.fixture
def paused_refresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, ...]]:
    """Thread A pauses just after bringing the index to its snapshot."""
    paused, resume = _pause_a(monkeypatch, before=False)
    yield paused, resume
    resume.set()


@pytest.fixture
def paused_snapshot(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, ...]]:
    """Thread A pauses holding its snapshot, before the index is brought to it."""
    paused, resume = _pause_a(monkeypatch, before=True)
    yield paused, resume
    resume.set()


def _run(name: str, call: Callable[[], Any], out: dict[str, Any]) -> threading.Thread:
    def target() -> None:
        try:
            out[name] = call()
        except BaseException as exc:  # reported by the test, not swallowed
            out[name] = exc

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def _facts(cx: cg.Cortex) -> list[cg.MemoryURI]:
    return [
        cx.write(cg.Fact(text=f"fact {i}", tags=["t"], priority=1 + i), at=T0 + i)
        for i in range(5)
    ]


@pytest.mark.parametrize("verb", ["find", "recall"])
def test_a_read_keeps_its_snapshot_while_another_thread_moves_on(
    cx: cg.Cortex, paused_refresh: tuple[threading.Event, ...], verb: str
) -> None:
    paused, resume = paused_refresh
    before = _facts(cx)
    seq = cx.seq

    def read() -> Any:
        if verb == "find":
            return cx.find(Q.type(cg.Fact) & Q.tag("t"), limit=3, order_by="priority", now=T0)
        return cx.recall("fact", k=3, mode="keyword", now=T0)

    out: dict[str, Any] = {}
    a = _run("A", read, out)
    assert paused.wait(WAIT)
    # committed while A reads: the best match of all, by priority and by keyword
    newest = cx.write(cg.Fact(text="fact fact fact", tags=["t"], priority=10), at=T0 + 9)
    c = _run("C", read, out)
    c.join(0.5)
    resume.set()
    a.join(WAIT)
    c.join(WAIT)
    assert not a.is_alive() and not c.is_alive()
    if isinstance(out["A"], BaseException):
        raise out["A"]
    if isinstance(out["C"], BaseException):
        raise out["C"]
    seen_by_a = [hit.uri for hit in out["A"].hits]
    assert out["A"].seq == seq
    assert newest not in seen_by_a
    assert set(seen_by_a) <= set(before)
    if verb == "find":
        assert seen_by_a == [before[4], before[3], before[2]]  # priorities 5, 4, 3
    assert out["C"].seq == seq + 1
    assert out["C"].hits[0].uri == newest


def test_an_older_snapshot_never_rebuilds_the_index(
    cx: cg.Cortex, paused_snapshot: tuple[threading.Event, ...]
) -> None:
    """Reads take the snapshot after the index's turn is theirs, so a thread never brings
    the index back to an older state (a full rebuild) and forward again."""
    paused, resume = paused_snapshot
    _facts(cx)

    def read() -> Any:
        return cx.find(Q.type(cg.Fact), limit=2, now=T0)

    read()  # the index is built once, here
    index = cx._column_index()
    builds = index.builds
    out: dict[str, Any] = {}
    a = _run("A", read, out)
    assert paused.wait(WAIT)
    cx.write(cg.Fact(text="later", tags=["t"]), at=T0 + 9)
    c = _run("C", read, out)
    c.join(0.5)
    resume.set()
    a.join(WAIT)
    c.join(WAIT)
    for name in ("A", "C"):
        assert not isinstance(out[name], BaseException), out[name]
    read()
    assert index.builds == builds
