"""Cutting a transcript into chunks an extractor can take, and reading transcripts.

A chunk holds whole turns and at most :data:`CHUNK_BYTES` of rendered transcript (each
turn as ``[role] text`` plus a newline, in UTF-8), so that it fits one extraction prompt.
A turn larger than that on its own is cut into pieces of its text, at character
boundaries, each piece a chunk; the pieces of one turn form one :class:`ChunkGroup`,
which ingest commits as a whole (the cursor counts whole turns).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from ..core.extraction import ExtractionContext, ExtractionInput, Turn
from ..errors import ValidationError

__all__ = ["CHUNK_BYTES", "TOOL_RESULT_CHARS", "ChunkGroup", "chunk_turns", "read_transcript"]

CHUNK_BYTES = 100_000
"""The most bytes of rendered transcript in one chunk (100 KB)."""
TOOL_RESULT_CHARS = 2_000
"""The most characters of one tool result a transcript turn keeps."""


@attrs.frozen
class ChunkGroup:
    """Chunks that end at a turn boundary: after them ``end`` turns are consumed."""

    end: int
    chunks: tuple[ExtractionInput, ...]


def _turn_bytes(turn: Turn) -> int:
    return len(turn.role.encode()) + len(turn.text.encode("utf-8")) + 4  # "[", "] ", "\n"


def _pieces(text: str, limit: int) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` UTF-8 bytes, at character bounds."""
    pieces = []
    data = text.encode("utf-8")
    start = 0
    while start < len(data):
        end = min(start + limit, len(data))
        while end < len(data) and (data[end] & 0xC0) == 0x80:  # inside a character
            end -= 1
        pieces.append(data[start:end].decode("utf-8"))
        start = end
    return pieces


def chunk_turns(
    turns: Sequence[Turn],
    *,
    start: int = 0,
    context: ExtractionContext | None = None,
    max_bytes: int = CHUNK_BYTES,
) -> list[ChunkGroup]:
    """The turns from ``start`` on, as groups of chunks of at most ``max_bytes`` each.

    >>> groups = chunk_turns([Turn("user", "a" * 60), Turn("user", "b" * 60)], max_bytes=100)
    >>> [(g.end, len(g.chunks)) for g in groups]
    [(1, 1), (2, 1)]

    Raises:
        ValidationError: ``max_bytes`` is not an int from 64 to 10,000,000, or ``start``
            is not a turn index (fields ``max_bytes``, ``start``).
    """
    if type(max_bytes) is not int or not 64 <= max_bytes <= 10_000_000:
        raise ValidationError("must be an int from 64 to 10,000,000", field="max_bytes")
    if type(start) is not int or not 0 <= start <= len(turns):
        raise ValidationError(f"must be an int from 0 to {len(turns)}", field="start")
    ctx = context if context is not None else ExtractionContext()
    groups: list[ChunkGroup] = []
    pending: list[Turn] = []
    size = 0
    for index in range(start, len(turns)):
        turn = turns[index]
        cost = _turn_bytes(turn)
        if pending and size + cost > max_bytes:
            groups.append(ChunkGroup(index, (ExtractionInput(pending, ctx),)))
            pending, size = [], 0
        if cost > max_bytes:
            room = max_bytes - (cost - len(turn.text.encode("utf-8")))
            chunks = tuple(
                ExtractionInput([Turn(turn.role, piece, turn.at)], ctx)
                for piece in _pieces(turn.text, room)
            )
            groups.append(ChunkGroup(index + 1, chunks))
            continue
        pending.append(turn)
        size += cost
    if pending:
        groups.append(ChunkGroup(len(turns), (ExtractionInput(pending, ctx),)))
    return groups


def _content_text(content: Any) -> str:
    """A Claude Code message's content as text: a string, or its blocks (text, tool use
    and tool results) rendered one per line."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "tool_use":
            parts.append(f"[tool {block.get('name', '?')}] {json.dumps(block.get('input'))}")
        elif kind == "tool_result":
            parts.append(_clip(_content_text(block.get("content"))))
    return "\n".join(p for p in parts if p)


def _clip(result: str) -> str:
    """The head of a tool's output: the bulk of it is the program's, not the
    conversation's, and would only crowd the extractor's chunk."""
    if len(result) <= TOOL_RESULT_CHARS:
        return result
    return (
        f"{result[:TOOL_RESULT_CHARS]}\n[... {len(result) - TOOL_RESULT_CHARS:,} more characters]"
    )


def read_transcript(path: str | Path, *, partial_tail: bool = False) -> list[Turn]:
    """The turns of a transcript file in JSON Lines.

    Two shapes are read, line by line: ``{"role": ..., "text": ...}`` (optionally
    ``"at"`` in ms), and Claude Code's session transcript, whose lines have ``"type"``
    ``user`` / ``assistant`` and a ``"message"`` with ``"content"`` as a string or blocks.
    Passed over: other line types (``summary``, ``system`` and other bookkeeping),
    sidechain lines (``"isSidechain": true``: a sub-agent's own conversation) and meta
    lines (``"isMeta": true``: text Claude Code injected, not said). A user line that only
    carries tool results becomes a ``tool`` turn, and each tool result is cut to its first
    :data:`TOOL_RESULT_CHARS` characters. Empty lines are ignored.

    Args:
        path: the transcript file.
        partial_tail: ignore a last line that is cut short (no final newline, and not
            JSON): the transcript is still being written, as when a hook reads the session
            it runs in, and the line is read in full next time. Otherwise it is an error.

    Raises:
        ValidationError: the file cannot be read or decoded as UTF-8, or a line is not a
            JSON object of either shape; the message names the line (field
            ``transcript``).
    """
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ValidationError(f"cannot read {str(path)!r}: {error}", field="transcript") from None
    turns: list[Turn] = []
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
            item = json.loads(line)
        except ValueError as error:  # UnicodeDecodeError is a ValueError too
            if partial_tail and number == len(lines):  # no newline after it: still written
                break
            what = "not UTF-8" if isinstance(error, UnicodeDecodeError) else f"not JSON ({error})"
            raise ValidationError(f"line {number}: {what}", field="transcript") from None
        turn = _line_turn(item, number)
        if turn is not None:
            turns.append(turn)
    return turns


def _line_turn(item: Any, number: int) -> Turn | None:
    if not isinstance(item, dict):
        raise ValidationError(f"line {number}: not a JSON object", field="transcript")
    try:
        if "role" in item:
            text: Any = item.get("text")  # Turn reports a missing or non-string text
            return Turn(item["role"], text, item.get("at"))
        kind = item.get("type")
        if item.get("isSidechain") is True or item.get("isMeta") is True:
            return None
        if kind not in ("user", "assistant"):
            if isinstance(kind, str):
                return None  # summary, system, file-history and other bookkeeping lines
            raise ValidationError("has neither a role nor a type", field="line")
        message = item.get("message")
        if not isinstance(message, dict):
            raise ValidationError("has no message object", field="message")
        content = message.get("content")
        text = _content_text(content)
        if not text.strip():
            return None
        role = kind
        if (
            kind == "user"
            and isinstance(content, list)
            and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        ):
            role = "tool"
        return Turn(role, text)
    except ValidationError as error:
        raise ValidationError(f"line {number}: {error}", field="transcript") from None
