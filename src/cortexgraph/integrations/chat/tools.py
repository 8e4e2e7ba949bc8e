"""The chat model's memory tools: their JSON Schemas and a dispatcher that never raises.

Four tools:

- ``memory_query(query, limit=5)``: recall what the chat memory knows (hot facts, and cold
  ones by their vectors; a cold fact found is promoted back to hot). Every fact returned
  is *touched*: the read is journaled as an access, which counts as a hit.
- ``fetch_chat_history(channel, limit=20, before=None)``: a channel's messages, oldest first.
- ``remember(text, type="fact", tags=[])``: keep a fact (or a preference, constraint,
  pattern or goal) for later turns.
- ``forget(uri)``: tombstone a remembered memory (the audit trail stays).

:meth:`ChatTools.schemas` gives them in Anthropic's tool format or OpenAI's
function-calling format; :meth:`ChatTools.dispatch` validates the arguments against the
schema's rules and returns a JSON text: ``{"result": ...}``, or ``{"is_error": true,
"error": "..."}`` for any bad call (unknown tool, malformed JSON, a missing, unknown or
ill-typed argument, a memory that does not exist) — never an exception.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from cortexgraph.errors import CortexError, ValidationError
from cortexgraph.integrations.chat.memory import KNOWLEDGE_TYPES, ChatMemory
from cortexgraph.integrations.chat.values import canonical_json

__all__ = ["TOOLS", "ChatTools"]

#: name -> (description, JSON Schema of the arguments)
TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "memory_query": (
        "Search long-term memory for facts relevant to a question.",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "what to look for"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    ),
    "fetch_chat_history": (
        "Read earlier messages of a channel, oldest first.",
        {
            "type": "object",
            "properties": {
                "channel": {"type": "string", "minLength": 1},
                "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 20},
                "before": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "only messages before this time (ms since the epoch)",
                },
            },
            "required": ["channel"],
            "additionalProperties": False,
        },
    ),
    "remember": (
        "Keep a fact for later conversations.",
        {
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1},
                "type": {"type": "string", "enum": sorted(KNOWLEDGE_TYPES), "default": "fact"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 16},
            },
            "required": ["text"],
            "additionalProperties": False,
        },
    ),
    "forget": (
        "Forget a remembered memory, by the uri memory_query or remember gave.",
        {
            "type": "object",
            "properties": {"uri": {"type": "string", "minLength": 1}},
            "required": ["uri"],
            "additionalProperties": False,
        },
    ),
}

_JSON_TYPES: dict[str, Callable[[object], bool]] = {
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,
    "array": lambda v: type(v) is list,
}


def check_arguments(name: str, arguments: object) -> dict[str, Any]:
    """The arguments of a call to tool ``name`` checked against its schema, defaults filled.

    Raises:
        ValidationError: the field names the argument at fault.
    """
    schema = TOOLS[name][1]
    if not isinstance(arguments, dict):
        raise ValidationError("must be a JSON object", field="arguments")
    properties: dict[str, Any] = schema["properties"]
    for key in arguments:
        if key not in properties:
            raise ValidationError(f"unknown argument for {name}", field=key)
    for key in schema["required"]:
        if key not in arguments:
            raise ValidationError(f"is required by {name}", field=key)
    out: dict[str, Any] = {}
    for key, rule in properties.items():
        if key not in arguments:
            if "default" in rule:
                out[key] = rule["default"]
            continue
        value = arguments[key]
        if not _JSON_TYPES[rule["type"]](value):
            raise ValidationError(f"must be a JSON {rule['type']}", field=key)
        if rule["type"] == "string" and len(value.strip()) < rule.get("minLength", 0):
            raise ValidationError("must not be blank", field=key)
        if "enum" in rule and value not in rule["enum"]:
            raise ValidationError(f"must be one of {', '.join(rule['enum'])}", field=key)
        if rule["type"] == "integer" and not (
            rule.get("minimum", value) <= value <= rule.get("maximum", value)
        ):
            raise ValidationError(
                f"must be from {rule.get('minimum')} to {rule.get('maximum', 'any')}", field=key
            )
        if rule["type"] == "array" and (
            len(value) > rule["maxItems"] or any(type(item) is not str for item in value)
        ):
            raise ValidationError(
                f"must be a list of at most {rule['maxItems']} strings", field=key
            )
        out[key] = value
    return out


class ChatTools:
    """The memory tools of a :class:`ChatMemory`.

    Args:
        chat: the chat memory the tools read and write.
    """

    def __init__(self, chat: ChatMemory) -> None:
        self.chat = chat

    @staticmethod
    def schemas(format: str = "anthropic") -> list[dict[str, Any]]:
        """The tool definitions, by name: Anthropic's ``{"name", "description",
        "input_schema"}`` or OpenAI's ``{"type": "function", "function": {"name",
        "description", "parameters"}}``.

        Raises:
            ValidationError: ``format`` is neither ``"anthropic"`` nor ``"openai"``.
        """
        if format == "anthropic":
            return [
                {"name": name, "description": text, "input_schema": schema}
                for name, (text, schema) in sorted(TOOLS.items())
            ]
        if format == "openai":
            return [
                {
                    "type": "function",
                    "function": {"name": name, "description": text, "parameters": schema},
                }
                for name, (text, schema) in sorted(TOOLS.items())
            ]
        raise ValidationError(f"must be 'anthropic' or 'openai', not {format!r}", field="format")

    def dispatch(self, name: object, arguments_json: object, *, now: int | None = None) -> str:
        """Run one tool call and return its result as JSON text; never raises for a bad
        call (see the module docstring for the result's shape).

        Args:
            name: the tool's name.
            arguments_json: its arguments, a JSON object as text.
            now: the time of any write or access (ms; default: the store's clock).
        """
        try:
            if type(name) is not str or name not in TOOLS:
                raise ValidationError(
                    f"unknown tool {name!r}; the tools are {', '.join(sorted(TOOLS))}",
                    field="name",
                )
            if type(arguments_json) is not str:
                raise ValidationError("must be a JSON text", field="arguments")
            try:
                arguments = json.loads(arguments_json)
            except ValueError as exc:
                raise ValidationError(f"is not valid JSON ({exc})", field="arguments") from None
            checked = check_arguments(name, arguments)
            result = getattr(self, name)(now=now, **checked)
        except CortexError as exc:
            field = getattr(exc, "field", None)
            error: dict[str, Any] = {"is_error": True, "error": str(exc)}
            if field:
                error["field"] = field
            return canonical_json(error)
        return canonical_json({"result": result})

    def memory_query(self, *, query: str, limit: int, now: int | None) -> list[dict[str, Any]]:
        """Hot and cold knowledge relevant to ``query``; touches (and so promotes) what it
        returns."""
        return [
            {"uri": str(record.uri.head), "type": record.memory.type_name,
             "text": record.memory.text}
            for record in self.chat.recall_facts(query, limit=limit, now=now)
        ]

    def fetch_chat_history(
        self, *, channel: str, limit: int, before: int | None = None, now: int | None
    ) -> list[dict[str, Any]]:
        """A channel's messages, oldest first."""
        return [
            {"role": m.role, "sender": m.sender, "content": m.content, "at": m.at}
            for m in self.chat.history(channel, limit=limit, before=before)
        ]

    def remember(
        self, *, text: str, type: str, tags: list[str] | None = None, now: int | None
    ) -> dict[str, Any]:
        """Write a memory of ``type`` tagged ``remembered``."""
        uri = self.chat.remember(text, type=type, tags=tags or (), at=now)
        return {"uri": str(uri.head)}

    def forget(self, *, uri: str, now: int | None) -> dict[str, Any]:
        """Tombstone a remembered memory."""
        gone = self.chat.forget(uri, at=now)
        return {"uri": str(gone.head), "forgotten": True}

