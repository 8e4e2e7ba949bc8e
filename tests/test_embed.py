"""Embedders: the protocol's contract, HashEmbedder's determinism, and HttpEmbedder against
a fake OpenAI-compatible server on 127.0.0.1. The model-backed embedders are tested in
``test_embed_models.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cortexgraph.embed import Embedder, HashEmbedder, HttpEmbedder
from cortexgraph.errors import EmbedderError, MissingExtraError, ValidationError
from embed_samples import PARAPHRASES, flat, pair_cosines, run_python
from local_server import LocalServer

ROOT = Path(__file__).resolve().parents[1]


# --- the protocol and input validation ------------------------------------------------------


def test_hash_embedder_satisfies_the_protocol() -> None:
    """HashEmbedder is an Embedder with the documented name and dimension."""
    emb = HashEmbedder()
    assert isinstance(emb, Embedder)
    assert (emb.name, emb.dim) == ("hash-v1-384", 384)
    assert HashEmbedder(dim=64).name == "hash-v1-64"


@pytest.mark.parametrize("bad", ["one text", b"bytes", 42, None, {"a"}])
def test_texts_must_be_a_sequence_of_str(bad: object) -> None:
    """A bare str (which would be embedded letter by letter), bytes, a number, None or a
    set is refused with a ValidationError naming ``texts``."""
    with pytest.raises(ValidationError) as info:
        HashEmbedder().embed(bad)  # type: ignore[arg-type]
    assert info.value.field == "texts"


@pytest.mark.parametrize("bad", [["ok", 3], ["ok", None], [b"bytes"], ["lone \ud800 surrogate"]])
def test_every_item_must_be_a_valid_str(bad: list[Any]) -> None:
    """A non-str item or a string that is not valid Unicode is refused, naming ``texts``
    and the item's position."""
    with pytest.raises(ValidationError, match=r"texts: item \d") as info:
        HashEmbedder().embed(bad)
    assert info.value.field == "texts"


@pytest.mark.parametrize("dim", [0, 7, 1 << 21, True, 3.0, "384"])
def test_hash_embedder_rejects_a_bad_dim(dim: Any) -> None:
    """``dim`` must be an int between 8 and 2**20."""
    with pytest.raises(ValidationError) as info:
        HashEmbedder(dim=dim)
    assert info.value.field == "dim"


def test_empty_input_gives_an_empty_matrix() -> None:
    """No texts -> a (0, dim) float32 array, not an error."""
    out = HashEmbedder(dim=32).embed([])
    assert out.shape == (0, 32)
    assert out.dtype == np.float32


# --- faulty custom embedders: one typed error, the store unchanged --------------------------

FAULTS: dict[str, Callable[[list[str], int], Any]] = {
    "wrong dimension": lambda texts, dim: np.ones((len(texts), dim + 1), dtype=np.float32),
    "too few rows": lambda texts, dim: np.ones((len(texts) - 1, dim), dtype=np.float32),
    "too many rows": lambda texts, dim: np.ones((len(texts) + 1, dim), dtype=np.float32),
    "None": lambda texts, dim: None,
    "one-dimensional": lambda texts, dim: np.ones(dim * len(texts), dtype=np.float32),
    "integers": lambda texts, dim: np.ones((len(texts), dim), dtype=np.int64),
    "strings": lambda texts, dim: np.full((len(texts), dim), "x"),
    "objects": lambda texts, dim: np.full((len(texts), dim), None, dtype=object),
    "ragged list": lambda texts, dim: [[1.0] * dim, [1.0]] * len(texts),
    "NaN": lambda texts, dim: np.full((len(texts), dim), np.nan, dtype=np.float32),
    "infinity": lambda texts, dim: np.full((len(texts), dim), -np.inf, dtype=np.float32),
    "float32 overflow": lambda texts, dim: np.full((len(texts), dim), 1e300),
    "raises": lambda texts, dim: {}["no such key"],
}


class FaultyFakeEmbedder:
    """A fake custom embedder: good HashEmbedder vectors, except for the texts for which
    ``faulty(texts)`` is true, where ``fault`` makes the reply."""

    name, dim = "faulty-v1", 16

    def __init__(self, fault: str, faulty: Callable[[list[str]], bool]) -> None:
        self.fault, self.faulty = FAULTS[fault], faulty

    def embed(self, texts: list[str]) -> Any:
        if self.faulty(texts):
            return self.fault(texts, self.dim)
        return HashEmbedder(self.dim).embed(texts)


@pytest.mark.parametrize("phase", ["memories", "query"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_faulty_embedder_gives_an_embedder_error(
    tmp_path: Path, fault: str, phase: str
) -> None:
    """Whatever a custom embedder gets wrong (shape, rows, None, non-float values, NaN or
    infinity, an exception of its own), embedding memories or a query raises
    EmbedderError naming the embedder; nothing is cached and the store is unchanged."""
    import cortexgraph as cg

    query = "what do we deploy"
    faulty = (lambda t: t != [query]) if phase == "memories" else (lambda t: t == [query])
    embedder = FaultyFakeEmbedder(fault, faulty)
    with cg.open(tmp_path, "a", sync=False, embedder=embedder) as cx:
        for text in ("deploy the API", "roll back the API"):
            cx.write(cg.Fact(text=text), at=1)
        digests = cx.table_digests()
        with pytest.raises(EmbedderError, match="embedder 'faulty-v1' ") as info:
            cx.recall(query, k=2, mode="vector")
        assert type(info.value) is EmbedderError
        # the cache is not memory state: only the good vectors (of the memories, when the
        # query was the bad one) were added to it
        assert {**cx.table_digests(), "emb": ""} == {**digests, "emb": ""}
        assert cx.stats().tables["emb"] == (0 if phase == "memories" else 2)


def test_recall_blames_text_for_invalid_unicode(tmp_path: Path) -> None:
    """A query that is not valid Unicode is refused naming recall's own argument ``text``,
    not the embedder's internal ``texts``, in every mode."""
    import cortexgraph as cg

    with cg.open(tmp_path, "a", sync=False) as cx:
        cx.write(cg.Fact(text="deploy"), at=1)
        for mode in ("keyword", "vector", "hybrid"):
            with pytest.raises(ValidationError) as info:
                cx.recall("\ud800", mode=mode)
            assert info.value.field == "text"


# --- HashEmbedder ---------------------------------------------------------------------------

HASH_TEXTS = ["The API is deployed by Argo CD", "Straße — naïve café, 東京 and emoji 🚀 ok", ""]
# SHA-256 of HashEmbedder(dim).embed(HASH_TEXTS).tobytes(): scheme hash-v1 pinned. If this
# changes, the vectors changed: bump the scheme's name (hash-v2) instead of updating this.
HASH_KNOWN = {
    384: "fc24c3b6f89c422983d36066aa52b6c5f8d834939c11c63d0cac1e27b542b926",
    64: "435e7f1f5bfa2fad7a8fe3cf3cb1b999f1faed1bf39e0f69d1b951e2818143b1",
}


def test_hash_embedder_matches_its_known_answers() -> None:
    """The hash-v1 vectors are pinned bit for bit (known-answer test)."""
    for dim, digest in HASH_KNOWN.items():
        assert hashlib.sha256(HashEmbedder(dim).embed(HASH_TEXTS).tobytes()).hexdigest() == digest


def test_hash_embedder_is_deterministic_in_process() -> None:
    """Two instances, and one text embedded alone or among others, give identical bytes."""
    a = HashEmbedder().embed(HASH_TEXTS)
    b = HashEmbedder().embed(list(reversed(HASH_TEXTS)))[::-1]
    alone = HashEmbedder().embed(HASH_TEXTS[:1])
    assert a.tobytes() == np.ascontiguousarray(b).tobytes()
    assert a[:1].tobytes() == alone.tobytes()


@pytest.mark.parametrize("seed", ["0", "12345"])
def test_hash_embedder_is_deterministic_across_processes(seed: str) -> None:
    """A fresh interpreter with another PYTHONHASHSEED gives the same bytes."""
    code = (
        "import hashlib; from cortexgraph.embed import HashEmbedder; "
        f"print(hashlib.sha256(HashEmbedder(384).embed({HASH_TEXTS!r}).tobytes()).hexdigest())"
    )
    out = run_python(code, {**os.environ, "PYTHONHASHSEED": seed}, timeout=60)
    assert out.strip() == HASH_KNOWN[384]


def test_hash_embedder_rows_are_unit_or_zero() -> None:
    """Rows with words have norm 1 (within float32 rounding); a text with no word character
    gives a zero row."""
    texts = ["deploy", "a much longer memory " * 50, "日本語のテキスト", "", "  -- !! ..  "]
    out = HashEmbedder().embed(texts)
    norms = np.linalg.norm(out.astype(np.float64), axis=1)
    assert out.dtype == np.float32
    np.testing.assert_allclose(norms[:3], 1.0, atol=1e-6)
    assert norms[3] == 0.0
    assert norms[4] == 0.0


def test_hash_embedder_ignores_case_and_unicode_form() -> None:
    """Case and Unicode normal form do not change the vector (NFKC + casefold)."""
    emb = HashEmbedder()
    a, b = emb.embed(["Café DEPLOY", "cafe\u0301 deploy"])
    assert a.tobytes() == b.tobytes()


def test_hash_embedder_puts_paraphrases_above_unrelated_pairs() -> None:
    """On the hand-made set, every paraphrase pair is closer than every unrelated pair."""
    para, unrelated = pair_cosines(HashEmbedder().embed(flat(PARAPHRASES)), len(PARAPHRASES))
    assert min(para) > max(unrelated), (min(para), max(unrelated))


def test_hash_embedder_matches_word_forms_through_trigrams() -> None:
    """'deploys' is closer to 'deployment' than to an unrelated word (character trigrams)."""
    deploys, deployment, banana = HashEmbedder().embed(["deploys", "deployment", "banana"])
    assert float(deploys @ deployment) > 0.3
    assert float(deploys @ deployment) > float(deploys @ banana) + 0.3


# --- HttpEmbedder against a fake OpenAI-compatible server -----------------------------------

Behaviour = Callable[[dict[str, Any]], tuple[int, dict[str, str], Any]]


def embedding_of(text: str, dim: int) -> list[float]:
    """The fake model: a vector derived from the text's length and first letter (unnormalised)."""
    base = [float(len(text) + 1), float(ord(text[0]) if text else 0)]
    return (base + [1.0] * dim)[:dim]


def ok(dim: int = 4, reverse: bool = False) -> Behaviour:
    """Answer like OpenAI: one item per input with its index (optionally in reverse order)."""

    def answer(body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        data = [
            {"object": "embedding", "index": i, "embedding": embedding_of(t, dim)}
            for i, t in enumerate(body["input"])
        ]
        if reverse:
            data.reverse()
        return 200, {}, {"object": "list", "data": data, "model": body["model"]}

    return answer


def fail(status: int, message: str = "try later", **headers: str) -> Behaviour:
    def answer(body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        return status, headers, {"error": {"message": message, "type": "test"}}

    return answer


def stall(seconds: float) -> Behaviour:
    """Answer correctly, but only after ``seconds`` (longer than the client's timeout)."""

    def answer(body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        time.sleep(seconds)
        return ok()(body)

    return answer


class FakeServer(LocalServer):
    """An OpenAI-compatible /v1/embeddings server on 127.0.0.1, in a thread.

    ``script`` holds the behaviours of the next requests in order; when it is empty the
    server answers with ``default``. Every request is recorded (path, headers, JSON body).
    """

    def __init__(self) -> None:
        self.script: list[Behaviour] = []
        self.default: Behaviour = ok()
        super().__init__(self._answer)

    def _answer(self, body: Any) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            behaviour = self.script.pop(0) if self.script else self.default
        status, headers, payload = behaviour(body)
        return status, headers, json.dumps(payload).encode()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    try:
        yield fake
    finally:
        fake.close()


class Sleeps(list[float]):
    """A fake ``sleep`` that records the delays instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def client(server: FakeServer, sleeps: Sleeps | None = None, **kwargs: Any) -> HttpEmbedder:
    kwargs.setdefault("model", "fake-embed")
    return HttpEmbedder(server.url, sleep=sleeps if sleeps is not None else Sleeps(), **kwargs)


def test_http_embedder_posts_openai_requests_in_batches(server: FakeServer) -> None:
    """5 texts with batch_size=2 make 3 POSTs to /v1/embeddings carrying the model and
    2, 2 and 1 inputs; the rows come back in input order, normalised, float32."""
    texts = ["alpha", "bb", "charlie", "d", "echo!"]
    with client(server, batch_size=2) as emb:
        out = emb.embed(texts)
    assert [r["path"] for r in server.requests] == ["/v1/embeddings"] * 3
    assert [r["body"]["input"] for r in server.requests] == [texts[:2], texts[2:4], texts[4:]]
    assert {r["body"]["model"] for r in server.requests} == {"fake-embed"}
    expected = np.array([embedding_of(t, 4) for t in texts])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert (emb.name, emb.dim) == ("http:fake-embed", 4)


def test_http_embedder_orders_rows_by_index(server: FakeServer) -> None:
    """A server that lists items in another order is reordered by each item's ``index``."""
    server.default = ok(reverse=True)
    texts = ["a", "bbb", "ccccc"]
    out = client(server).embed(texts)
    first_components = out[:, 0] / out[:, 1]  # (len + 1) / ord(first letter)
    np.testing.assert_allclose(first_components, [2 / ord("a"), 4 / ord("b"), 6 / ord("c")])


def test_http_embedder_sends_the_bearer_key_only_when_given(server: FakeServer) -> None:
    """``api_key`` becomes ``Authorization: Bearer <key>``; without it no such header."""
    client(server, api_key="sk-test-123").embed(["x"])
    client(server).embed(["x"])
    assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-test-123"
    assert "Authorization" not in server.requests[1]["headers"]


def test_http_embedder_retries_503_and_429_with_exponential_backoff(server: FakeServer) -> None:
    """503, 503, 429 then 200: four requests, waits of 0.5, 1 and 2 seconds (backoff 0.5
    doubling), then the right vectors."""
    server.script = [fail(503), fail(503), fail(429)]
    sleeps = Sleeps()
    out = client(server, sleeps).embed(["hello"])
    assert len(server.requests) == 4
    assert sleeps == [0.5, 1.0, 2.0]
    assert out.shape == (1, 4)


def test_http_embedder_honours_retry_after_with_a_cap(server: FakeServer) -> None:
    """``Retry-After: 3`` waits 3 s; ``Retry-After: 3600`` is capped at 60 s; an HTTP-date
    in the past means no wait."""
    server.script = [
        fail(429, **{"Retry-After": "3"}),
        fail(503, **{"Retry-After": "3600"}),
        fail(429, **{"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
    ]
    sleeps = Sleeps()
    client(server, sleeps).embed(["hello"])
    assert sleeps == [3.0, 60.0, 0.0]


def test_http_embedder_gives_up_after_the_retries(server: FakeServer) -> None:
    """With retries=2, three 503s raise EmbedderError with the status and the server's
    message, after exactly three requests."""
    server.default = fail(503, "overloaded, come back later")
    sleeps = Sleeps()
    with pytest.raises(EmbedderError, match=r"after 3 attempts.*overloaded") as info:
        client(server, sleeps, retries=2, backoff=0.25).embed(["hello"])
    assert info.value.status == 503
    assert len(server.requests) == 3
    assert sleeps == [0.25, 0.5]


def test_http_embedder_fails_at_once_on_a_client_error(server: FakeServer) -> None:
    """400 is not retried: one request, no wait, the server's message in the error."""
    server.default = fail(400, "This model's maximum context length is 8192 tokens")
    sleeps = Sleeps()
    with pytest.raises(EmbedderError, match="HTTP 400: This model's maximum context") as info:
        client(server, sleeps).embed(["hello"])
    assert info.value.status == 400
    assert len(server.requests) == 1
    assert sleeps == []


def test_http_embedder_retries_after_a_timeout(server: FakeServer) -> None:
    """A server that stalls past the timeout is retried; the next answer is used."""
    server.script = [stall(1.0)]
    sleeps = Sleeps()
    started = time.monotonic()
    out = client(server, sleeps, timeout=0.2).embed(["hello"])
    assert out.shape == (1, 4)
    assert sleeps == [0.5]
    assert len(server.requests) == 2
    assert time.monotonic() - started < 1.0  # the stalled request was abandoned


def test_http_embedder_reports_persistent_timeouts(server: FakeServer) -> None:
    """When every attempt times out the error says so and names the attempts."""
    server.default = stall(0.6)
    with pytest.raises(EmbedderError, match=r"after 2 attempts: .*Timeout") as info:
        client(server, timeout=0.15, retries=1).embed(["hello"])
    assert info.value.status is None


def test_http_embedder_retries_connection_errors() -> None:
    """Nothing listening on the port: each attempt is refused, waits grow, then an error."""
    probe = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    url = f"http://127.0.0.1:{probe.server_address[1]}"
    probe.server_close()  # the port is now closed
    sleeps = Sleeps()
    with pytest.raises(EmbedderError, match="after 4 attempts: ConnectError"):
        HttpEmbedder(url, model="m", retries=3, sleep=sleeps).embed(["x"])
    assert sleeps == [0.5, 1.0, 2.0]


def test_http_embedder_checks_the_dimension(server: FakeServer) -> None:
    """A given ``dim`` that the server does not return is an error; without ``dim`` the
    first response fixes it and a later response of another size is an error."""
    with pytest.raises(EmbedderError, match="dimension 4, expected 8"):
        client(server, dim=8).embed(["x"])
    emb = client(server)
    assert emb.embed(["x"]).shape == (1, 4)
    server.default = ok(dim=5)
    with pytest.raises(EmbedderError, match="dimension 5, expected 4"):
        emb.embed(["y"])


def test_http_embedder_probes_the_dimension_when_asked(server: FakeServer) -> None:
    """Reading ``dim`` before any call makes one request; later reads make none."""
    emb = client(server)
    assert emb.dim == 4
    assert emb.dim == 4
    assert len(server.requests) == 1
    assert emb.embed([]).shape == (0, 4)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "payload",
    [
        {"nothing": []},
        {"data": [{"index": 0, "embedding": [1.0, 0.0]}]},  # one item for two inputs
        {"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]},
        {"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]},
        {"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": "AAAA"}]},
        {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [float("nan")]}]},
    ],
    ids=["no-data", "too-few", "repeated-index", "ragged", "base64", "nan"],
)
def test_http_embedder_rejects_malformed_responses(
    server: FakeServer, payload: dict[str, Any]
) -> None:
    """Responses with missing, repeated, ragged, non-numeric or NaN data are EmbedderErrors,
    not garbage vectors."""
    server.default = lambda body: (200, {}, payload)
    with pytest.raises(EmbedderError, match=r"malformed response|NaN"):
        client(server).embed(["a", "b"])


def test_http_embedder_accepts_a_base_url_ending_in_v1(server: FakeServer) -> None:
    """``http://host/v1`` and ``http://host/`` both post to ``/v1/embeddings``."""
    HttpEmbedder(server.url + "/v1/", model="m", sleep=Sleeps()).embed(["x"])
    HttpEmbedder(server.url + "/", model="m", sleep=Sleeps()).embed(["x"])
    assert [r["path"] for r in server.requests] == ["/v1/embeddings"] * 2


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"base_url": "ftp://x"}, "base_url"),
        ({"model": ""}, "model"),
        ({"api_key": ""}, "api_key"),
        ({"dim": 0}, "dim"),
        ({"batch_size": 0}, "batch_size"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": float("inf")}, "timeout"),
        ({"retries": -1}, "retries"),
        ({"backoff": -0.1}, "backoff"),
    ],
)
def test_http_embedder_validates_its_arguments(kwargs: dict[str, Any], field: str) -> None:
    """Each out-of-range argument is a ValidationError naming it."""
    args: dict[str, Any] = {"base_url": "http://127.0.0.1:9", "model": "m", **kwargs}
    with pytest.raises(ValidationError) as info:
        HttpEmbedder(args.pop("base_url"), **args)
    assert info.value.field == field


def test_http_embedder_without_httpx_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without httpx, constructing HttpEmbedder raises MissingExtraError naming the extra."""
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'cortexgraph\[http\]'") as info:
        HttpEmbedder("http://127.0.0.1:9", model="m")
    assert info.value.extra == "http"


def test_an_unknown_recorded_embedder_is_named_whatever_its_dimension() -> None:
    """A store's recorded embedder that cannot be made without arguments (here a small
    custom one) is reported as such, not as a hashing embedder of a bad dimension."""
    from cortexgraph.embed import embedder_for

    with pytest.raises(ValidationError, match="custom:2") as caught:
        embedder_for({"name": "custom:2", "dim": 2})
    assert caught.value.field == "embedder"
