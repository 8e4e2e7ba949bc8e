"""The assembled context of one chat turn and its rendering as model messages (pure).

:class:`ChatContext` holds the four layers that :meth:`ChatMemory.assemble` builds: the
system floor (identity, active operations, known facts), the foreground (the trigger
channel's recent messages, oldest first), the background (one line per other active
channel) and the archived layer, which costs nothing and so holds nothing.
:func:`to_messages` renders them for Anthropic's Messages API or OpenAI's Chat Completions
API, and :func:`render_json` gives the canonical bytes of a payload: the same state gives
the same bytes, so a provider's prompt cache hits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from cortexgraph.core.uri import MemoryURI
from cortexgraph.errors import ValidationError

__all__ = ["ChatContext", "ChatMessage", "render_json", "to_messages"]

FORMATS = ("anthropic", "openai")


@attrs.frozen
class ChatMessage:
    """One message of a channel, as :meth:`ChatMemory.append` recorded it.

    Attributes:
        uri: the message's Event, pinned.
        channel: the channel it was said on.
        role: ``user``, ``assistant``, ``tool_use`` or ``tool_result``.
        sender: who said it.
        content: the text (for ``tool_use``, the tool input as JSON).
        at: when it was said (ms since the epoch).
        metadata: the caller's metadata (``tool_use`` carries ``id`` and ``name``,
            ``tool_result`` carries ``tool_use_id`` and optionally ``is_error``).
        seq: the journal seq that recorded it (the strict order of the session).
    """

    uri: MemoryURI
    channel: str
    role: str
    sender: str
    content: str
    at: int
    metadata: Mapping[str, Any]
    seq: int


@attrs.frozen
class ChatContext:
    """The layers of one turn's context.

    Attributes:
        channel: the trigger channel.
        identity: the identity lines (pinned preferences and constraints), in order.
        operations: one line per active operation.
        facts: the known facts, one line each.
        foreground: the trigger channel's messages, oldest first.
        background: one ``[channel] summary (last: time)`` line per other active channel.
        tokens: the estimated tokens of all layers together.
    """

    channel: str
    identity: tuple[str, ...]
    operations: tuple[str, ...]
    facts: tuple[str, ...]
    foreground: tuple[ChatMessage, ...]
    background: tuple[str, ...]
    tokens: int

    def system_text(self) -> str:
        """The system prompt: the system floor, then the background layer."""
        return system_text(self.identity, self.operations, self.facts, self.background)

    def to_messages(self, format: str = "anthropic") -> dict[str, Any]:
        """This context as a request payload; see :func:`to_messages`."""
        return to_messages(self, format)


def system_text(
    identity: tuple[str, ...],
    operations: tuple[str, ...],
    facts: tuple[str, ...],
    background: tuple[str, ...],
) -> str:
    """The sections of the system prompt that have lines, each under its heading."""
    sections = []
    for heading, lines in (
        ("Identity", identity),
        ("Active operations", operations),
        ("Known facts", facts),
        ("Other channels", background),
    ):
        if lines:
            bullet = "" if heading == "Other channels" else "- "
            body = "\n".join(bullet + line for line in lines)
            sections.append(f"## {heading}\n{body}")
    return "\n\n".join(sections)


def user_text(message: ChatMessage) -> str:
    """A user message as the model sees it: the sender names who spoke in a shared
    channel."""
    return f"{message.sender}: {message.content}"


def to_messages(context: ChatContext, format: str = "anthropic") -> dict[str, Any]:
    """Render ``context`` as a request payload.

    Anthropic: ``{"system": text, "messages": [...]}`` with content blocks; user and
    assistant messages alternate (consecutive messages of one role are merged into one
    message of several blocks); a ``tool_use`` message becomes an assistant ``tool_use``
    block and a ``tool_result`` message a user ``tool_result`` block. The conversation
    starts with the first user message that is not a tool result (the API refuses
    anything else first), so older assistant turns cut by the window are dropped.

    OpenAI: ``{"messages": [...]}``, the system prompt first, ``tool_use`` as an assistant
    message's ``tool_calls`` and ``tool_result`` as a ``tool`` message; consecutive user
    or assistant texts are joined by a blank line.

    Raises:
        ValidationError: ``format`` is neither ``"anthropic"`` nor ``"openai"``
            (field ``format``).
    """
    if format not in FORMATS:
        raise ValidationError(
            f"must be 'anthropic' or 'openai', not {format!r}", field="format"
        )
    messages = list(context.foreground)
    while messages and messages[0].role != "user":
        messages.pop(0)
    if format == "anthropic":
        return {"system": context.system_text(), "messages": _anthropic(messages)}
    return {"messages": _openai(context.system_text(), messages)}


def _anthropic(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        role, block = _anthropic_block(message)
        if out and out[-1]["role"] == role:
            out[-1]["content"].append(block)
        else:
            out.append({"role": role, "content": [block]})
    return out


def _anthropic_block(message: ChatMessage) -> tuple[str, dict[str, Any]]:
    meta = message.metadata
    if message.role == "tool_use":
        return "assistant", {
            "type": "tool_use",
            "id": meta["id"],
            "name": meta["name"],
            "input": json.loads(message.content),
        }
    if message.role == "tool_result":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": meta["tool_use_id"],
            "content": message.content,
        }
        if meta.get("is_error") is True:
            block["is_error"] = True
        return "user", block
    if message.role == "user":
        return "user", {"type": "text", "text": user_text(message)}
    return "assistant", {"type": "text", "text": message.content}


def _openai(system: str, messages: list[ChatMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for message in messages:
        meta = message.metadata
        last = out[-1]
        if message.role == "tool_use":
            call = {
                "id": meta["id"],
                "type": "function",
                "function": {"name": meta["name"], "arguments": message.content},
            }
            if last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif message.role == "tool_result":
            out.append(
                {"role": "tool", "tool_call_id": meta["tool_use_id"], "content": message.content}
            )
        else:
            role = message.role
            text = user_text(message) if role == "user" else message.content
            if last["role"] == role and "tool_calls" not in last:
                last["content"] = f"{last['content']}\n\n{text}"
            else:
                out.append({"role": role, "content": text})
    return out


def render_json(payload: Mapping[str, Any]) -> bytes:
    """The canonical bytes of a payload: sorted keys, no spaces, UTF-8 as is."""
    return json.dumps(
        payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")
