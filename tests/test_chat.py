"""The chat runtime's memory: messages per channel, channel state and layers, the layered
context and its rendering, and the durable inbound queue (crash recovery included)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph.integrations.chat import ChatMemory, render_json

FIXTURES = Path(__file__).parent / "fixtures" / "chat"
SRC = Path(__file__).resolve().parents[1] / "src"
DAY1 = 1_767_571_200_000  # 2026-01-05 00:00 UTC
DAY2 = DAY1 + 24 * 3600 * 1000
H = 3600 * 1000
M = 60 * 1000


def script(chat: ChatMemory) -> None:
    """Three channels over two days, tool round trip and a shared millisecond included."""
    chat.append("telegram", "user", "cat", "Ping", DAY1 + 8 * H)
    chat.append("discord", "user", "ann", "Morning! Can you check the deploy?", DAY1 + 9 * H)
    chat.append("discord", "assistant", "hal", "Checking the deploy now.", DAY1 + 9 * H + M)
    chat.append("discord", "tool_use", "hal", '{"query": "deploy"}', DAY1 + 9 * H + M,
                {"id": "t1", "name": "memory_query"})
    chat.append("discord", "tool_result", "tools", "[]", DAY1 + 9 * H + M,
                {"tool_use_id": "t1"})
    chat.append("discord", "assistant", "hal", "No deploy notes yet.", DAY1 + 9 * H + 2 * M)
    chat.append("slack", "user", "bob", "Lunch at noon?", DAY1 + 10 * H)
    chat.append("slack", "user", "bob", "Standup moved to 10.", DAY2 + 9 * H + 30 * M)
    chat.append("slack", "user", "dan", "Thanks", DAY2 + 9 * H + 30 * M)
    chat.append("discord", "user", "ann", "Any news?", DAY2 + 9 * H + 45 * M)


@pytest.fixture
def cx(tmp_path: Path):
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(DAY1)) as store:
        yield store


def seeded(cx: cg.Cortex) -> ChatMemory:
    cx.write(cg.Preference(text="You are Hal, a terse assistant.", tags=["identity"],
                           pinned=True), ns="chat", at=DAY1)
    cx.write(cg.Fact(text="The deploy runs on Fridays.", tags=["remembered"]), ns="chat", at=DAY1)
    return ChatMemory(cx)


def expected(name: str) -> bytes:
    return render_json(json.loads((FIXTURES / name).read_text()))


def test_scripted_conversation_layers_and_messages_match_hand_written_files(cx) -> None:
    """A three-channel, two-day conversation: at day 1 noon every channel is active; at
    day 2 10:00 telegram (idle 26 h) is archived and out of the context; the rendered
    payloads equal the files written by hand, byte for byte."""
    chat = seeded(cx)
    script(chat)
    noon = DAY1 + 12 * H
    # the day-1 context is assembled from the day-1 state: replay the script up to then
    with cg.open(cx.path.parent, "early", clock=cg.ManualClock(DAY1)) as early:
        first = seeded(early)
        for channel, role, sender, content, at, meta in _day1(first):
            first.append(channel, role, sender, content, at, meta)
        context = first.assemble("discord", 2000, now=noon)
        assert render_json(context.to_messages("anthropic")) == expected(
            "day1_discord.anthropic.json")
        assert render_json(context.to_messages("openai")) == expected("day1_discord.openai.json")
        assert {s.channel: s.layer_at(noon) for s in first.channels()} == {
            "discord": "foreground", "slack": "foreground", "telegram": "foreground"}
    ten = DAY2 + 10 * H
    layers = {s.channel: s.layer_at(ten) for s in chat.channels()}
    assert layers == {"discord": "foreground", "slack": "foreground", "telegram": "archived"}
    context = chat.assemble("slack", 2000, now=ten)
    assert render_json(context.to_messages("anthropic")) == expected("day2_slack.anthropic.json")
    assert render_json(context.to_messages("openai")) == expected("day2_slack.openai.json")
    assert [m.content for m in chat.assemble("discord", 2000, now=ten).foreground] == [
        "Morning! Can you check the deploy?", "Checking the deploy now.", '{"query": "deploy"}',
        "[]", "No deploy notes yet.", "Any news?"]
    assert (chat.channel("slack").unread, chat.channel("discord").unread) == (3, 1)


def _day1(chat: ChatMemory) -> list[tuple]:
    calls: list[tuple] = []

    class Recorder:
        def append(self, *args):
            calls.append(args + (None,) * (6 - len(args)))

    script(Recorder())  # type: ignore[arg-type]
    return [call for call in calls if call[4] < DAY2]


def test_assemble_is_byte_stable_and_survives_reopen(tmp_path: Path) -> None:
    """The same state gives the same bytes, in this handle and after reopening."""
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(DAY1)) as cx:
        chat = seeded(cx)
        script(chat)
        first = render_json(chat.assemble("discord", 2000, now=DAY2 + 10 * H).to_messages())
        assert first == render_json(
            chat.assemble("discord", 2000, now=DAY2 + 10 * H).to_messages())
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(DAY1)) as cx:
        again = ChatMemory(cx).assemble("discord", 2000, now=DAY2 + 10 * H).to_messages()
        assert render_json(again) == first


def test_same_calls_give_same_journal_bytes(tmp_path: Path) -> None:
    """Two stores driven by the same calls hold identical journals."""
    journals = []
    for actor in ("one", "two"):
        with cg.open(tmp_path / actor, "bot", clock=cg.ManualClock(DAY1)) as cx:
            chat = seeded(cx)
            script(chat)
            chat.enqueue({"text": "x"}, at=DAY2)
            item = chat.next(at=DAY2)
            assert item is not None
            chat.complete(item.id, at=DAY2)
            journals.append(b"".join(data for _, data in cx.journal_bytes()))
    assert journals[0] == journals[1]


def test_history_window_keeps_strict_order_inside_one_millisecond(cx) -> None:
    """Cutting a window among messages of one millisecond keeps the last appended ones,
    in the order they were appended."""
    chat = ChatMemory(cx)
    for i in range(30):
        chat.append("c", "user", "u", f"m{i}", DAY1)
    assert [m.content for m in chat.history("c", limit=5)] == [f"m{i}" for i in range(25, 30)]
    assert [m.content for m in chat.history("c", limit=2, before=DAY1 + 1)] == ["m28", "m29"]
    assert chat.history("c", limit=3, before=DAY1) == []


def test_foreground_respects_budget_and_caps(cx) -> None:
    """The foreground keeps the newest messages that fit the budget left after the system
    floor, never more than 20."""
    chat = ChatMemory(cx)
    for i in range(40):
        chat.append("c", "user", "u", f"message {i} " + "word " * 20, DAY1 + i)
    full = chat.assemble("c", 100_000, now=DAY1 + 100)
    assert len(full.foreground) == 20
    assert full.foreground[-1].content.startswith("message 39 ")
    small = chat.assemble("c", 60, now=DAY1 + 100)
    assert 0 < len(small.foreground) < 5 and small.tokens <= 60
    assert small.foreground[-1].content.startswith("message 39 ")


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("Bad Channel", "user", "u", "x", DAY1, None), "channel"),
        (("c", "system", "u", "x", DAY1, None), "role"),
        (("c", "user", "", "x", DAY1, None), "sender"),
        (("c", "user", "u", "  ", DAY1, None), "content"),
        (("c", "user", "u", "x", -1, None), "at"),
        (("c", "user", "u", "x", DAY1, {"k": object()}), "metadata"),
        (("c", "user", "u", "x", DAY1, {"k": float("nan")}), "metadata"),
        (("c", "user", "u", "x", DAY1, {"k": "x" * 1100}), "metadata"),
        (("c", "tool_use", "u", "{}", DAY1, {"id": "t"}), "metadata"),
        (("c", "tool_use", "u", "[1]", DAY1, {"id": "t", "name": "n"}), "content"),
        (("c", "tool_result", "u", "x", DAY1, {}), "metadata"),
    ],
)
def test_append_rejects_bad_input_and_writes_nothing(cx, args, field) -> None:
    """Each bad argument is a ValidationError naming it, and the journal is unchanged."""
    chat = ChatMemory(cx)
    before = cx.seq
    with pytest.raises(cg.ValidationError) as info:
        chat.append(*args)
    assert info.value.field == field
    assert cx.seq == before


def test_append_many_is_all_or_nothing(cx) -> None:
    """A bad message in a batch leaves the store and the channel states unchanged."""
    chat = ChatMemory(cx)
    with pytest.raises(cg.ValidationError):
        chat.append_many([("a", "user", "u", "ok", DAY1, None), ("a", "user", "u", "", DAY1, None)])
    assert cx.seq == 0 and chat.channels() == []


def test_queue_priorities_fifo_attempts_and_failure(cx) -> None:
    """urgent > normal > background, first in first out within a tier; fail puts an
    envelope back until max_attempts, then it is failed; complete removes it."""
    chat = ChatMemory(cx, max_attempts=2)
    ids = {name: chat.enqueue({"n": name}, prio, at=DAY1 + i)
           for i, (name, prio) in enumerate(
               [("b1", "background"), ("n1", "normal"), ("u1", "urgent"), ("n2", "normal"),
                ("u2", "urgent")])}
    order = []
    while (item := chat.next(at=DAY1 + 100)) is not None:
        order.append(item.envelope["n"])
        if item.envelope["n"] == "n1" and item.attempts == 1:
            back = chat.fail(item.id, "model timed out", at=DAY1 + 100)
            assert (back.state, back.attempts, back.error) == ("pending", 1, "model timed out")
        elif item.envelope["n"] == "b1":
            assert chat.fail(item.id, "again", at=DAY1 + 100).state == "pending"
            assert chat.next(at=DAY1 + 100).id == ids["b1"]  # type: ignore[union-attr]
            assert chat.fail(ids["b1"], "gave up", at=DAY1 + 100).state == "failed"
        else:
            chat.complete(item.id, at=DAY1 + 100)
    assert order == ["u1", "u2", "n1", "n1", "n2", "b1"]
    assert chat.queued() == []
    with pytest.raises(cg.NotFoundError):
        chat.complete(ids["u1"])
    with pytest.raises(cg.ValidationError) as info:
        chat.enqueue({"n": 1}, "high")
    assert info.value.field == "priority"
    with pytest.raises(cg.ValidationError) as info:
        chat.enqueue({"n": float("nan")})
    assert info.value.field == "envelope"


def test_processing_goes_back_to_pending_on_open(tmp_path: Path) -> None:
    """An envelope handed out and never completed is pending again for the next
    ChatMemory, with its attempt counted, and is handed out first."""
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(DAY1)) as cx:
        chat = ChatMemory(cx)
        first = chat.enqueue({"n": 1}, at=DAY1)
        chat.enqueue({"n": 2}, at=DAY1 + 1)
        assert chat.next(at=DAY1 + 2).id == first  # type: ignore[union-attr]
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(DAY1)) as cx:
        chat = ChatMemory(cx, now=DAY1 + 10)
        assert [(i.envelope["n"], i.state, i.attempts) for i in chat.queued()] == [
            (1, "pending", 1), (2, "pending", 0)]


CHILD = """
import sys, cortexgraph as cg
from cortexgraph.integrations.chat import ChatMemory
cx = cg.open(sys.argv[1], "bot", clock=cg.ManualClock(1))
chat = ChatMemory(cx)
item = chat.next(at=5)
print(item.id, flush=True)
sys.stdin.read()  # processing: the parent kills us here
"""


def test_sigkill_during_processing_loses_nothing_and_retries_once(tmp_path: Path) -> None:
    """A real process killed with SIGKILL while processing an envelope: after reopening,
    every envelope is still there, the interrupted one is handed out exactly once more,
    and each is handed out once in all."""
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(1)) as cx:
        chat = ChatMemory(cx)
        ids = [chat.enqueue({"n": n}, at=n) for n in range(3)]
    env = dict(os.environ, PYTHONPATH=str(SRC))
    with subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        taken = child.stdout.readline().strip()
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL
    assert taken == ids[0]
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(1)) as cx:
        chat = ChatMemory(cx, now=10)
        handed = []
        while (item := chat.next(at=20)) is not None:
            handed.append((item.id, item.attempts))
            chat.complete(item.id, at=20)
        assert handed == [(ids[0], 2), (ids[1], 1), (ids[2], 1)]
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(1)) as cx:
        assert ChatMemory(cx, now=30).next(at=30) is None


def test_rendering_starts_at_a_user_message_and_refuses_unknown_formats(cx) -> None:
    """A window that begins with assistant turns or a tool result is rendered from its
    first user text message (both formats), and an unknown format is a ValidationError."""
    chat = ChatMemory(cx)
    chat.append("c", "tool_result", "tools", "ok", DAY1, {"tool_use_id": "x"})
    chat.append("c", "assistant", "hal", "earlier answer", DAY1 + 1)
    chat.append("c", "user", "ann", "hi", DAY1 + 2)
    chat.append("c", "tool_use", "hal", '{"q": 1}', DAY1 + 3, {"id": "t9", "name": "memory_query"})
    context = chat.assemble("c", 2000, now=DAY1 + 10)
    assert context.to_messages("anthropic")["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "ann: hi"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t9", "name": "memory_query", "input": {"q": 1}}]},
    ]
    assert context.to_messages("openai")["messages"][1:] == [
        {"role": "user", "content": "ann: hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "t9", "type": "function",
             "function": {"name": "memory_query", "arguments": '{"q": 1}'}}]},
    ]
    with pytest.raises(cg.ValidationError) as info:
        context.to_messages("gemini")
    assert info.value.field == "format"
