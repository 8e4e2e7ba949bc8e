"""HttpExtractor against a local HTTP server on 127.0.0.1 that serves recorded chat
completion responses (fixtures/extraction/http/)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cortexgraph as cg
from cortexgraph.errors import ExtractionError, ValidationError
from cortexgraph.extract import ExtractionInput, HttpExtractor, Turn, ingest
from local_server import LocalServer

RECORDED = Path(__file__).resolve().parent.parent / "fixtures" / "extraction" / "http"


class Recorded(LocalServer):
    """A server answering each POST with the next (status, recorded file) of ``script``
    (no file: a body that is not JSON), and recording the requests (path, headers, JSON
    body)."""

    def __init__(self) -> None:
        self.script: list[tuple[int, str]] = []
        super().__init__(self._answer)

    def _answer(self, body: Any) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            status, name = self.script.pop(0)
        return status, {}, (RECORDED / name).read_bytes() if name else b"not json at all"


@pytest.fixture
def server() -> Iterator[Recorded]:
    fake = Recorded()
    try:
        yield fake
    finally:
        fake.close()


SOURCE = ExtractionInput([Turn("user", "Never push to main. We use SQLite in WAL mode.")])


def test_recorded_answer_is_parsed_and_written(
    cx: cg.Cortex, server: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorded completion (fenced JSON, one unknown type) gives three memories, the
    global preference in the global namespace, the decision as a tagged Fact, an edge by
    the ``related`` alias; the request is an OpenAI chat completion with the bearer key
    read from the named variable and the prompt as the user message."""
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-test-123")
    server.script.append((200, "ok.json"))
    with HttpExtractor(server.url + "/v1", model="qwen", api_key_env="FAKE_LLM_KEY") as ex:
        report = ingest(cx, SOURCE, source_id="chat-7", extractor=ex)
    records = [cx.resolve(uri) for uri in report.written]
    assert [(r.uri.ns, r.memory.type_name) for r in records] == [
        ("default", "constraint"), ("default", "fact"), ("global", "preference")]
    assert "decision" in records[1].memory.tags
    assert report.skipped == (("candidate 3", report.skipped[0][1]),)
    assert report.edges == 1
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test-123"
    assert request["body"]["model"] == "qwen" and request["body"]["temperature"] == 0
    assert request["body"]["messages"][0]["content"].endswith(
        "[user] Never push to main. We use SQLite in WAL mode.")


@pytest.mark.parametrize(
    ("status", "name", "message"),
    [
        (429, "error_429.json", "answered 429"),
        (200, "no_choices.json", "did not answer a chat completion"),
        (200, "prose_only.json", "no JSON array"),
        (200, "", "did not answer a chat completion"),
    ],
)
def test_failures_raise_and_write_nothing(
    cx: cg.Cortex, server: Recorded, status: int, name: str, message: str
) -> None:
    """A 429, a completion without choices, an answer in prose only and a body that is
    not JSON each raise ExtractionError, and the store's tables are unchanged."""
    cx.write(cg.Fact(text="already here"))
    before = cx.table_digests()
    server.script.append((status, name))
    with HttpExtractor(server.url, model="qwen", api_key_env=None) as ex, pytest.raises(
        ExtractionError, match=message
    ):
        ingest(cx, SOURCE, source_id="chat-7", extractor=ex)
    assert cx.table_digests() == before


def test_unreachable_server_is_an_extraction_error() -> None:
    """A refused connection (a port nothing listens on) raises ExtractionError, not an
    httpx exception."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with HttpExtractor(url, model="qwen", api_key_env=None, timeout=2) as ex, pytest.raises(
        ExtractionError, match="failed"
    ):
        ex.extract(SOURCE)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"base_url": "ftp://x", "model": "m"}, "base_url"),
        ({"base_url": "http://x", "model": ""}, "model"),
        ({"base_url": "http://x", "model": "m", "api_key_env": "CG_TEST_UNSET_KEY"},
         "api_key_env"),
        ({"base_url": "http://x", "model": "m", "api_key_env": None, "timeout": -1}, "timeout"),
    ],
)
def test_bad_arguments_name_their_field(
    kwargs: dict[str, Any], field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A non-HTTP URL, an empty model, an unset key variable and a negative timeout are
    ValidationErrors naming the argument."""
    monkeypatch.delenv("CG_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ValidationError) as info:
        HttpExtractor(**kwargs)
    assert info.value.field == field
