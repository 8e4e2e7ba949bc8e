"""``cortexgraph chat-context`` and ``chat-garden``: the chat memory from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph.cli import main
from cortexgraph.integrations.chat import ChatMemory, render_json

T0 = 1_767_571_200_000
H = 3600 * 1000


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_chat_context_prints_the_payload_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """chat-context prints the canonical payload the library gives, from a read-only
    handle: an envelope left processing is not recovered by it (the journal is unchanged)."""
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(T0)) as cx:
        chat = ChatMemory(cx)
        chat.append("general", "user", "ann", "hello", T0)
        chat.append("random", "user", "bob", "cats", T0 + 1)
        chat.enqueue({"n": 1}, at=T0)
        chat.next(at=T0)
        expected = render_json(chat.assemble("general", 500, now=T0 + H).to_messages("openai"))
        seq = cx.seq
    root = ["--root", str(tmp_path), "--actor", "bot"]
    code, out, _ = run(capsys, "chat-context", "general", "--budget", "500", "--format",
                       "openai", "--now", str(T0 + H), *root)
    assert code == 0 and out.strip().encode() == expected
    with cg.open(tmp_path, "bot", readonly=True) as cx:
        assert cx.seq == seq
    code, _, err = run(capsys, "chat-context", "Bad Channel", *root)
    assert code == 1 and "channel" in err


def test_chat_garden_twice_at_the_same_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """chat-garden reports what it did; run again at the same --now it does nothing."""
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(T0)) as cx:
        chat = ChatMemory(cx)
        chat.append("general", "user", "ann", "Never push to main.", T0)
    root = ["--root", str(tmp_path), "--actor", "bot", "--json"]
    code, out, _ = run(capsys, "chat-garden", "--now", str(T0 + 2 * H), *root)
    first = json.loads(out)
    assert code == 0 and first["compacted"] == ["general"] and first["extracted"]
    code, out, _ = run(capsys, "chat-garden", "--now", str(T0 + 2 * H), *root)
    assert code == 0 and json.loads(out) == {
        "compacted": [], "extracted": [], "evicted": [], "harvested": [],
        "archived_operations": 0}
