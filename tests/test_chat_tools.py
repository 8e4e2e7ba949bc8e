"""The chat model's memory tools: schemas in both formats, every tool through dispatch,
malformed calls answered as error results, and hot/cold knowledge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph.integrations.chat import ChatMemory
from cortexgraph.integrations.chat.tools import TOOLS, ChatTools

T0 = 1_767_571_200_000
DAY = 24 * 3600 * 1000


@pytest.fixture
def chat(tmp_path: Path):
    with cg.open(tmp_path, "bot", clock=cg.ManualClock(T0)) as cx:
        yield ChatMemory(cx)


def call(tools: ChatTools, name: str, arguments: object, now: int = T0) -> dict:
    text = tools.dispatch(name, json.dumps(arguments), now=now)
    return json.loads(text)


def test_schemas_in_both_formats_describe_the_four_tools() -> None:
    """Anthropic's and OpenAI's forms carry the same names and the same JSON Schemas."""
    anthropic = ChatTools.schemas("anthropic")
    openai = ChatTools.schemas("openai")
    names = ["fetch_chat_history", "forget", "memory_query", "remember"]
    assert [tool["name"] for tool in anthropic] == names
    assert [tool["function"]["name"] for tool in openai] == names
    assert all(tool["type"] == "function" for tool in openai)
    assert [tool["input_schema"] for tool in anthropic] == [
        tool["function"]["parameters"] for tool in openai]
    assert all(schema["type"] == "object" and schema["additionalProperties"] is False
               for schema in (tool["input_schema"] for tool in anthropic))
    with pytest.raises(cg.ValidationError) as info:
        ChatTools.schemas("gemini")
    assert info.value.field == "format"


def test_every_tool_through_dispatch(chat: ChatMemory) -> None:
    """remember writes, memory_query finds and touches, fetch_chat_history reads the
    channel, forget tombstones; every result is JSON without is_error."""
    tools = ChatTools(chat)
    chat.append("general", "user", "ann", "Where do we deploy?", T0)
    chat.append("general", "assistant", "hal", "To the staging cluster.", T0 + 1)
    kept = call(tools, "remember", {"text": "Deploys go to the staging cluster first.",
                                    "type": "constraint", "tags": ["deploy"]})
    uri = kept["result"]["uri"]
    record = chat.cx.resolve(uri)
    assert (record.memory.type_name, record.memory.tags) == ("constraint",
                                                            ("deploy", "remembered"))
    found = call(tools, "memory_query", {"query": "staging cluster deploy", "limit": 3},
                 now=T0 + 5)
    assert found["result"][0] == {"uri": uri, "type": "constraint",
                                  "text": "Deploys go to the staging cluster first."}
    assert chat.cx.salience(uri, now=T0 + 5).access_count == 1
    history = call(tools, "fetch_chat_history", {"channel": "general", "limit": 1})
    assert history == {"result": [{"role": "assistant", "sender": "hal",
                                   "content": "To the staging cluster.", "at": T0 + 1}]}
    older = call(tools, "fetch_chat_history", {"channel": "general", "before": T0 + 1})
    assert [m["content"] for m in older["result"]] == ["Where do we deploy?"]
    assert call(tools, "forget", {"uri": uri}) == {"result": {"uri": uri, "forgotten": True}}
    assert chat.cx.resolve(uri).status == "tombstoned"
    assert call(tools, "memory_query", {"query": "staging cluster deploy"}) == {"result": []}


MALFORMED = [
    ("no_such_tool", '{}', "name"),
    (None, '{}', "name"),
    ("memory_query", "{not json", "arguments"),
    ("memory_query", b'{"query": "x"}', "arguments"),
    ("memory_query", "[1, 2]", "arguments"),
    ("memory_query", "{}", "query"),
    ("memory_query", '{"query": 7}', "query"),
    ("memory_query", '{"query": "   "}', "query"),
    ("memory_query", '{"query": "x", "limit": 0}', "limit"),
    ("memory_query", '{"query": "x", "limit": true}', "limit"),
    ("memory_query", '{"query": "x", "colour": "red"}', "colour"),
    ("fetch_chat_history", '{"channel": "Not A Channel"}', "channel"),
    ("fetch_chat_history", '{"channel": "general", "before": -5}', "before"),
    ("fetch_chat_history", '{"channel": "general", "limit": 1.5}', "limit"),
    ("remember", '{"text": "x", "type": "opinion"}', "type"),
    ("remember", '{"text": "x", "tags": "deploy"}', "tags"),
    ("remember", '{"text": "x", "tags": ["has space"]}', "tags"),
    ("remember", '{"text": "x", "tags": ["identity"]}', "tags"),
    ("forget", '{"uri": "not a uri"}', "uri"),
    ("forget", '{"uri": "cx://bot/chat/000102030405060708090a0b0c0d0e0f#latest"}', "uri"),
]


@pytest.mark.parametrize(("name", "arguments", "field"), MALFORMED)
def test_malformed_calls_are_error_results(chat: ChatMemory, name, arguments, field) -> None:
    """A malformed call returns {"is_error": true, ...} naming the argument at fault, and
    writes nothing."""
    before = chat.cx.seq
    result = json.loads(ChatTools(chat).dispatch(name, arguments, now=T0))
    assert result["is_error"] is True and result["error"]
    assert result.get("field") == field
    assert chat.cx.seq == before


def test_forget_refuses_messages_and_unknown_memories(chat: ChatMemory) -> None:
    """forget cannot tombstone a message nor a memory that does not exist: both are
    error results."""
    tools = ChatTools(chat)
    message = chat.append("general", "user", "ann", "hello", T0)
    refused = call(tools, "forget", {"uri": str(message.uri.head)})
    assert refused["is_error"] is True and refused["field"] == "uri"
    missing = call(tools, "forget", {"uri": "cx://bot/chat/000102030405060708090a0b0c0d0e0f"})
    assert missing["is_error"] is True and "000102030405060708090a0b0c0d0e0f" in missing["error"]
    assert set(TOOLS) == {"memory_query", "fetch_chat_history", "remember", "forget"}


def test_hot_facts_rank_by_hits_then_recency_and_cold_ones_come_back(chat: ChatMemory) -> None:
    """Known facts are ordered by hits, then by the latest touch or write; an archived
    (cold) fact leaves them, is still found by memory_query, and is hot again after."""
    a = chat.remember("Ann drinks green tea.", at=T0)
    b = chat.remember("Bob owns the deploy pipeline.", at=T0 + 1)
    c = chat.remember("The office closes at six.", at=T0 + 2)
    assert [r.uri.head for r in chat.hot_facts(now=T0 + 10)] == [c.head, b.head, a.head]
    chat.recall_facts("deploy pipeline Bob", limit=1, now=T0 + 20)
    assert chat.hot_facts(now=T0 + 30)[0].uri.head == b.head
    chat.cx.archive(a, at=T0 + 40)
    assert a.head not in [r.uri.head for r in chat.hot_facts(now=T0 + 50)]
    found = chat.recall_facts("green tea Ann drinks", limit=2, now=T0 + 60)
    assert a.head in [r.uri.head for r in found]
    assert chat.cx.resolve(a.head).status == "active"
    assert a.head in [r.uri.head for r in chat.hot_facts(now=T0 + 70)]
