"""``HttpEmbedder``: any OpenAI-compatible ``POST /v1/embeddings`` endpoint.

Works with OpenAI, Azure-style proxies, vLLM, llama.cpp's server, Ollama's OpenAI API,
text-embeddings-inference and the like. Request and response::

    POST {base_url}/v1/embeddings
    Authorization: Bearer <api_key>          (only when a key is given)
    {"model": "<model>", "input": ["text 0", "text 1", ...]}

    200 {"data": [{"index": 0, "embedding": [0.1, ...]}, ...], ...}

The client only turns the texts it is given into vectors. What is sent is the caller's
choice; the recall layer never sends raw code (``ArtifactRef`` content) to an embedder.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..errors import EmbedderError, MissingExtraError, ValidationError
from .base import check_int, check_texts, normalize_rows

if TYPE_CHECKING:
    import httpx

__all__ = ["HttpEmbedder"]

INSTALL_HINT = "pip install 'cortexgraph[http]'"
MAX_DELAY = 60.0
"""The longest wait between two attempts, in seconds, whatever ``Retry-After`` says."""
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise MissingExtraError(
            f"HttpEmbedder needs the 'http' extra (httpx is missing): {INSTALL_HINT}",
            extra="http",
        ) from exc
    return httpx


class HttpEmbedder:
    """Embeddings from an OpenAI-compatible HTTP endpoint, with batching and retries.

    Texts are sent in batches of ``batch_size``; each batch is one request. Connection
    errors, timeouts and answers 408, 429, 500, 502, 503 and 504 are retried up to
    ``retries`` times, waiting ``backoff * 2**attempt`` seconds (0.5, 1, 2, 4 by default),
    or what the server's ``Retry-After`` header asks when it sends one; every wait is capped
    at 60 s. Other 4xx answers fail at once with the server's message. Vectors are
    L2-normalised on arrival (a zero vector stays zero).

    The first response fixes ``dim`` when it was not given; a response of another
    dimension later is an error. Reading ``dim`` before any call makes one request (it
    embeds the text ``"dimension probe"``): pass ``dim=`` to avoid it.

    Args:
        base_url: the server, ``http://`` or ``https://``; ``/v1/embeddings`` is appended
            (a trailing ``/v1`` in ``base_url`` is accepted and not doubled).
        model: the model name sent with every request; part of :attr:`name`.
        api_key: sent as ``Authorization: Bearer <api_key>`` when given.
        dim: the expected dimension; checked against every response.
        batch_size: texts per request, 1 to 2048.
        timeout: seconds for each request (connect, read, write), > 0.
        retries: extra attempts per batch after the first, >= 0.
        backoff: the first wait in seconds, >= 0; it doubles at each retry.
        client: an ``httpx.Client`` to use (for proxies, TLS settings or tests); by default
            one is created and closed by :meth:`close`.
        sleep: how to wait between attempts (inject a fake in tests).

    Raises:
        ValidationError: an argument is out of range (``field`` names it).
        MissingExtraError: httpx is not installed (``pip install 'cortexgraph[http]'``).

    >>> emb = HttpEmbedder("http://127.0.0.1:8080", model="nomic-embed-text", dim=768)
    >>> emb.name, emb.dim
    ('http:nomic-embed-text', 768)
    >>> emb.close()
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        dim: int | None = None,
        batch_size: int = 64,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.5,
        client: httpx.Client | None = None,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValidationError("expected an http:// or https:// URL", field="base_url")
        if not isinstance(model, str) or not model:
            raise ValidationError("expected a non-empty str", field="model")
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise ValidationError("expected a non-empty str or None", field="api_key")
        check_int("dim", dim, 1, 1 << 20, optional=True)
        check_int("batch_size", batch_size, 1, 2048)
        check_int("retries", retries, 0, 100)
        _check_number("timeout", timeout, positive=True)
        _check_number("backoff", backoff, positive=False)
        self._httpx = _import_httpx()
        url = base_url.rstrip("/")
        if url.endswith("/v1"):
            url = url[: -len("/v1")]
        self._url = url + "/v1/embeddings"
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._dim = dim
        self._batch_size = batch_size
        self._timeout = float(timeout)
        self._retries = retries
        self._backoff = float(backoff)
        self._sleep = sleep
        self._owns_client = client is None
        self._client: httpx.Client = (
            self._httpx.Client(timeout=self._timeout) if client is None else client
        )

    @property
    def name(self) -> str:
        """``"http:<model>"``."""
        return f"http:{self._model}"

    @property
    def dim(self) -> int:
        """The dimension: as given, or fixed by the first response (a probe request if none
        was made yet)."""
        if self._dim is None:
            self.embed(["dimension probe"])  # sets _dim from the response, or raises
        if self._dim is None:  # pragma: no cover - embed either set it or raised
            raise EmbedderError("the server's dimension is unknown")
        return self._dim

    def __repr__(self) -> str:
        return f"HttpEmbedder({self._url!r}, model={self._model!r}, dim={self._dim})"

    def close(self) -> None:
        """Close the HTTP client if this embedder created it."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> HttpEmbedder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts`` into a ``(len(texts), dim)`` float32 array of unit rows.

        Raises:
            ValidationError: ``texts`` is not a sequence of str (``field == "texts"``).
            EmbedderError: the server refused a request (``.status`` holds its code and the
                message its explanation), retries ran out, a response was malformed, or its
                dimension differs from ``dim``.
        """
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = []
        for start in range(0, len(items), self._batch_size):
            rows.append(self._embed_batch(items[start : start + self._batch_size]))
        return normalize_rows(np.concatenate(rows))

    def _embed_batch(self, batch: list[str]) -> NDArray[np.float64]:
        payload = {"model": self._model, "input": batch}
        httpx = self._httpx
        attempts = self._retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = self._client.post(
                    self._url, json=payload, headers=self._headers, timeout=self._timeout
                )
            except httpx.TransportError as exc:  # connection refused or reset, timeouts
                problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                if last:
                    raise EmbedderError(
                        f"POST {self._url} failed after {attempts} attempts: {problem}"
                    ) from exc
                self._sleep(self._delay(attempt, None))
                continue
            status = response.status_code
            if status == 200:
                return self._parse(response, len(batch))
            message = _server_message(response)
            if status not in RETRY_STATUSES:
                raise EmbedderError(f"POST {self._url}: HTTP {status}: {message}", status=status)
            if last:
                raise EmbedderError(
                    f"POST {self._url} failed after {attempts} attempts: HTTP {status}: {message}",
                    status=status,
                )
            self._sleep(self._delay(attempt, response.headers.get("retry-after")))
        raise AssertionError("unreachable")  # pragma: no cover

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after is not None:
            seconds = _parse_retry_after(retry_after)
            if seconds is not None:
                return min(seconds, MAX_DELAY)
        return float(min(self._backoff * 2.0**attempt, MAX_DELAY))

    def _parse(self, response: httpx.Response, n: int) -> NDArray[np.float64]:
        try:
            body = response.json()
            data = body["data"]
            if not isinstance(data, list) or len(data) != n:
                raise ValueError(f"expected {n} items in 'data'")
            slots: list[list[float] | None] = [None] * n
            for item in data:
                index = item["index"]
                if not isinstance(index, int) or not 0 <= index < n or slots[index] is not None:
                    raise ValueError(f"bad or repeated index {index!r}")
                slots[index] = item["embedding"]
            matrix = np.array(slots, dtype=np.float64)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbedderError(f"POST {self._url}: malformed response: {exc}") from exc
        if matrix.ndim != 2 or matrix.shape[1] == 0:
            raise EmbedderError(f"POST {self._url}: malformed response: ragged embeddings")
        if not np.all(np.isfinite(matrix)):
            raise EmbedderError(f"POST {self._url}: malformed response: NaN or infinity")
        got = int(matrix.shape[1])
        if self._dim is None:
            self._dim = got
        elif got != self._dim:
            raise EmbedderError(
                f"POST {self._url}: model {self._model!r} returned vectors of dimension "
                f"{got}, expected {self._dim}"
            )
        return matrix


def _server_message(response: httpx.Response) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the body text (trimmed)."""
    try:
        body = response.json()
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    except ValueError:
        pass
    text = response.text.strip()
    return text[:500] if text else response.reason_phrase


def _parse_retry_after(value: str) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP date (RFC 9110)."""
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        import email.utils  # only for an HTTP-date Retry-After; the module costs milliseconds

        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    if math.isnan(seconds):
        return None
    return max(0.0, seconds)


def _check_number(field: str, value: object, *, positive: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"expected a number, got {type(value).__name__}", field=field)
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValidationError(f"must be finite and {bound}, got {value}", field=field)
