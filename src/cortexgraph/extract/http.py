"""``HttpExtractor``: extraction by any OpenAI-compatible chat completions endpoint.

One ``POST {base_url}/v1/chat/completions`` per chunk, the prompt as the user message,
``temperature`` 0; the answer's ``choices[0].message.content`` is parsed like a command's
output. Needs httpx (the ``http`` extra). The API key is read from the environment
variable named by ``api_key_env`` when the extractor is made, never stored in the store.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..core.extraction import ExtractionInput, build_prompt, parse_candidates
from ..errors import ExtractionError, MissingExtraError, ValidationError
from .protocol import Candidates, check_input, check_timeout

if TYPE_CHECKING:
    import httpx

__all__ = ["HttpExtractor"]

_SHOWN = 300


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise MissingExtraError(
            "HttpExtractor needs the 'http' extra (httpx is missing):"
            " pip install 'cortexgraph[http]'",
            extra="http",
        ) from exc
    return httpx


class HttpExtractor:
    """Candidates from an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    Args:
        base_url: ``http://`` or ``https://``; ``/v1/chat/completions`` is appended (a
            trailing ``/v1`` is not doubled).
        model: the model name sent with each request.
        api_key_env: the name of the environment variable holding the API key, sent as
            ``Authorization: Bearer``; ``None`` sends no key. A named variable that is
            unset or empty is an error.
        timeout: seconds per request (> 0).
        client: an ``httpx.Client`` to use (proxies, TLS, tests); by default one is made
            and closed by :meth:`close`.

    Raises:
        ValidationError: a bad URL, model, variable name or timeout, or the variable is
            unset (field ``api_key_env``).
        MissingExtraError: httpx is not installed.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 120.0,
        client: httpx.Client | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValidationError("expected an http:// or https:// URL", field="base_url")
        if not isinstance(model, str) or not model:
            raise ValidationError("expected a non-empty str", field="model")
        self.timeout = check_timeout(timeout)
        headers = {}
        if api_key_env is not None:
            if not isinstance(api_key_env, str) or not api_key_env:
                raise ValidationError("expected a variable name or None", field="api_key_env")
            key = os.environ.get(api_key_env)
            if not key:
                raise ValidationError(
                    f"the environment variable {api_key_env} is unset or empty",
                    field="api_key_env",
                )
            headers["Authorization"] = f"Bearer {key}"
        self._httpx = _import_httpx()
        url = base_url.rstrip("/")
        if url.endswith("/v1"):
            url = url[: -len("/v1")]
        self.url = url + "/v1/chat/completions"
        self.model = model
        self._headers = headers
        self._owns_client = client is None
        self._client = self._httpx.Client(timeout=self.timeout) if client is None else client

    def __repr__(self) -> str:
        return f"HttpExtractor({self.url!r}, model={self.model!r})"

    def close(self) -> None:
        """Close the HTTP client if this extractor made it."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> HttpExtractor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def extract(self, source: ExtractionInput) -> Candidates:
        """The candidates the model finds in ``source``.

        Raises:
            ExtractionError: the request failed or timed out, the server answered with a
                status other than 200 (``status`` is set), or the answer is not a chat
                completion holding a JSON array of candidates.
        """
        body = {
            "model": self.model,
            "temperature": 0,
            "messages": [{"role": "user", "content": build_prompt(check_input(source))}],
        }
        try:
            response = self._client.post(
                self.url, json=body, headers=self._headers, timeout=self.timeout
            )
        except self._httpx.HTTPError as error:
            raise ExtractionError(f"POST {self.url} failed: {error}") from None
        if response.status_code != 200:
            raise ExtractionError(
                f"POST {self.url} answered {response.status_code}: {response.text[:_SHOWN]!r}",
                status=response.status_code,
            )
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, LookupError, TypeError):
            raise ExtractionError(
                f"POST {self.url} did not answer a chat completion: {response.text[:_SHOWN]!r}",
                status=200,
            ) from None
        if not isinstance(content, str):
            raise ExtractionError(f"POST {self.url}: the message content is not text", status=200)
        result = parse_candidates(content)
        return Candidates(result.candidates, skipped=result.skipped)
