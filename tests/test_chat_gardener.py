"""The chat memory's gardener and pending operations: each gardening step does its job,
a second run at the same now changes nothing, and operations follow their lifecycle
(start-up cleanup of orphans included)."""

from __future__ import annotations

from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph.integrations.chat import ChatMemory
from cortexgraph.integrations.chat.gardener import ExtractiveSummarizer, Gardener
from cortexgraph.integrations.chat.operations import ORPHANED

T0 = 1_767_571_200_000
H = 3600 * 1000
DAY = 24 * H


@pytest.fixture
def cx(tmp_path: Path):
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(T0)) as store:
        yield store


def populated(cx: cg.Cortex) -> ChatMemory:
    chat = ChatMemory(cx, now=T0)
    chat.append("ops", "user", "ann", "We always deploy on Fridays. Never push to main.", T0)
    chat.append("ops", "assistant", "hal", "Noted.", T0 + 1)
    chat.append("lunch", "user", "bob", "Pizza at noon?", T0 + 2 * H)
    chat.remember("The old VPN host is vpn1.", at=T0)
    op = chat.operations.start("search", "find the release notes", at=T0)
    chat.operations.complete(op.id, "notes are in docs/releases.md", at=T0 + H)
    chat.operations.acknowledge(at=T0 + H)
    return chat


def test_gardener_twice_at_the_same_now_changes_nothing(cx) -> None:
    """The first run compacts, extracts, evicts and harvests; the second run at the same
    now journals nothing: the seq and the overall root are unchanged."""
    chat = populated(cx)
    gardener = Gardener(chat)
    now = T0 + 15 * DAY
    first = gardener.run(now=now)
    assert set(first.compacted) == set()  # both channels are archived by then
    assert first.extracted and first.harvested and first.evicted
    seq, root = cx.seq, cx.overall_root()
    second = gardener.run(now=now)
    assert (second.compacted, second.extracted, second.evicted, second.harvested,
            second.archived_operations) == ((), (), (), (), 0)
    assert (cx.seq, cx.overall_root()) == (seq, root)
    again = Gardener(ChatMemory(cx, now=now)).run(now=now)
    assert again.extracted == () and (cx.seq, cx.overall_root()) == (seq, root)


def test_channel_compactor_demotes_idle_foreground_channels(cx) -> None:
    """A channel idle for an hour or more gets the summarizer's line and moves to the
    background; a busy one stays in the foreground; the background line shows it."""
    chat = populated(cx)
    gardener = Gardener(chat)
    assert gardener.compact_channels(now=T0 + 2 * H + 10) == ["ops"]
    ops = chat.channel("ops")
    assert ops.layer == "background"
    assert ops.summary == ("2 recent messages from ann; last: We always deploy on Fridays")
    assert chat.channel("lunch").layer == "foreground"
    context = chat.assemble("lunch", 2000, now=T0 + 2 * H + 10)
    assert context.background == (
        "[ops] 2 recent messages from ann; last: We always deploy on Fridays "
        "(last: 2026-01-05 00:00 UTC)",)
    assert gardener.compact_channels(now=T0 + 2 * H + 10) == []


def test_custom_summarizer_is_used_and_checked(cx) -> None:
    """An injected summarizer writes the summary; an object without summarize is refused."""
    chat = populated(cx)

    class Fixed:
        def summarize(self, messages):
            return f"deploy talk ({len(messages)})"

    Gardener(chat, summarizer=Fixed()).compact_channels(now=T0 + 5 * H)
    assert chat.channel("ops").summary == "deploy talk (2)"
    with pytest.raises(cg.ValidationError) as info:
        Gardener(chat, summarizer=object())  # type: ignore[arg-type]
    assert info.value.field == "summarizer"
    assert ExtractiveSummarizer().summarize([]) == "no messages"


def test_fact_extractor_takes_each_message_once(cx) -> None:
    """Facts come from the messages through the extractor; a later run sees only the
    messages appended since."""
    chat = populated(cx)
    gardener = Gardener(chat)
    written = gardener.extract_facts(now=T0 + 3 * H)
    texts = sorted(cx.resolve(uri).memory.text for uri in written)
    assert any("main" in text for text in texts)
    assert gardener.extract_facts(now=T0 + 3 * H) == []
    chat.append("ops", "user", "ann", "Never deploy without a changelog entry.", T0 + 4 * H)
    later = gardener.extract_facts(now=T0 + 5 * H)
    assert [cx.resolve(uri).memory.text for uri in later] == [
        "Never deploy without a changelog entry."]


def test_vector_evictor_makes_old_unread_facts_cold(cx) -> None:
    """A fact untouched for 14 days with under 3 hits goes cold; one read 3 times or
    touched recently stays hot; a cold one is found again by memory_query."""
    chat = ChatMemory(cx, now=T0)
    idle = chat.remember("The staging database is pg-stage-2.", at=T0)
    popular = chat.remember("The billing service owner is Dora.", at=T0)
    for i in range(3):
        chat.recall_facts("billing service owner Dora", limit=1, now=T0 + i)
    assert Gardener(chat).evict_vectors(now=T0 + 13 * DAY) == []
    assert Gardener(chat).evict_vectors(now=T0 + 14 * DAY) == [idle.head]
    assert cx.resolve(idle.head).status == "archived"
    assert cx.resolve(popular.head).status == "active"
    found = chat.recall_facts("staging database pg-stage-2", limit=1, now=T0 + 15 * DAY)
    assert [r.uri.head for r in found] == [idle.head]
    assert cx.resolve(idle.head).status == "active"


def test_operations_lifecycle_in_the_system_floor(cx) -> None:
    """Pending and unread outcomes are shown; acknowledge hides them; the harvester makes
    a fact of a read completed operation; 7 days after gardening it is archived."""
    chat = ChatMemory(cx, now=T0)
    ops = chat.operations
    a = ops.start("agent", "summarise the incident", expected_channel="ops", at=T0)
    b = ops.start("search", "look up the on-call rota", at=T0 + 1)
    ops.complete(a.id, "incident summary posted", at=T0 + 10)
    ops.fail(b.id, "search backend down", at=T0 + 11)
    assert chat.assemble("ops", 2000, now=T0 + 20).operations == (
        "[completed] agent: summarise the incident -> incident summary posted",
        "[failed] search: look up the on-call rota -> search backend down",
    )
    assert len(ops.acknowledge(at=T0 + 30)) == 2
    assert ops.acknowledge(at=T0 + 30) == []
    assert chat.assemble("ops", 2000, now=T0 + 40).operations == ()
    facts, archived = Gardener(chat).harvest_operations(now=T0 + DAY)
    assert [cx.resolve(uri).memory.text for uri in facts] == [
        'agent operation "summarise the incident" completed: incident summary posted']
    assert archived == 0
    assert Gardener(chat).harvest_operations(now=T0 + 8 * DAY) == ([], 2)
    assert ops.live() == []
    with pytest.raises(cg.ValidationError) as info:
        ops.start("agent", "  ")
    assert info.value.field == "description"
    c = ops.start("agent", "x", at=T0)
    ops.complete(c.id, "done", at=T0)
    with pytest.raises(cg.ValidationError):
        ops.complete(c.id, "again", at=T0)
    with pytest.raises(cg.NotFoundError):
        ops.fail("cx://bot/chat/000102030405060708090a0b0c0d0e0f", "x")


def test_orphaned_operations_fail_at_start_up_and_show_for_one_turn(tmp_path: Path) -> None:
    """An operation left pending by a run that stopped fails at the next start with the
    orphan message, is shown in the next turn's floor, and is gone after acknowledge."""
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(T0)) as cx:
        ChatMemory(cx, now=T0).operations.start("agent", "build the report", at=T0)
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(T0)) as cx:
        chat = ChatMemory(cx, now=T0 + 100)
        [op] = chat.operations.live()
        assert (op.status, op.result, op.completed_at) == ("failed", ORPHANED, T0 + 100)
        assert chat.assemble("general", 500, now=T0 + 200).operations == (
            f"[failed] agent: build the report -> {ORPHANED}",)
        chat.operations.acknowledge(at=T0 + 300)
        assert chat.assemble("general", 500, now=T0 + 400).operations == ()
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(T0)) as cx:
        seq = cx.seq
        ChatMemory(cx, now=T0 + 500)
        assert cx.seq == seq  # nothing left to clean up
