"""The plugin's settings: which embedder and which extractor the hooks and commands use.

A JSON object in ``<project>/.memory/config.json``, else in the global store's directory
(``~/.claude/memory/config.json`` or ``$CORTEXGRAPH_HOME/config.json``), else the defaults.
Every key is optional::

    {
      "embedder": "static",                 # null (default), "static", "local", "torch" or "hash"
      "extractor": {"command": ["claude", "-p"], "timeout": 300},   # or "rules" (default)
      "prompt_tokens": 300                  # the prompt hook's budget (50..4000)
    }

- **embedder**: with one set, the stores are opened with it, memories are embedded as they
  are written, and the prompt hook and ``/recall`` use hybrid recall (keyword and vector,
  fused). Without one (the default) recall is keyword recall and no model is ever loaded.
  ``static`` (the distilled model, fast to load) suits the prompt hook best.
- **extractor**: ``"rules"`` is the rule extractor (no model, deterministic); a
  ``command`` runs that program once per transcript chunk with the extraction prompt on
  stdin (``["claude", "-p"]`` uses Claude Code's own model), see
  :class:`cortexgraph.extract.CommandExtractor`.

A malformed file is a :class:`~cortexgraph.errors.ValidationError` naming the file and
the key; the hooks log it and carry on, the commands exit 2.

>>> PluginConfig.from_json({"embedder": "hash", "prompt_tokens": 200}).prompt_tokens
200
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ...errors import ValidationError
from .stores import global_store, project_store

if TYPE_CHECKING:
    from ...embed import Embedder
    from ...extract import Extractor

__all__ = ["CONFIG_NAME", "EMBEDDERS", "PluginConfig", "load_config"]

CONFIG_NAME = "config.json"
EMBEDDERS = ("static", "local", "torch", "hash")
_KEYS = ("embedder", "extractor", "prompt_tokens")
_PROMPT_TOKENS = (50, 4000)


@attrs.frozen
class PluginConfig:
    """The plugin's settings (see the module doc).

    Attributes:
        embedder: one of :data:`EMBEDDERS`, or None for keyword recall only.
        extractor_command: the extraction program and its arguments, or None for the
            rule extractor.
        extractor_timeout: seconds the extraction program may take per chunk.
        prompt_tokens: the most tokens the prompt hook injects.
        source: the file the settings came from (None: the defaults).
    """

    embedder: str | None = None
    extractor_command: tuple[str, ...] | None = None
    extractor_timeout: float = 300.0
    prompt_tokens: int = 300
    source: Path | None = None

    @classmethod
    def from_json(cls, value: object, source: Path | None = None) -> PluginConfig:
        """Settings from a parsed JSON document.

        Raises:
            ValidationError: not an object, an unknown key or a bad value (``field``
                names the key).
        """
        where = f" in {source}" if source is not None else ""
        if not isinstance(value, dict):
            raise ValidationError(f"the plugin settings{where} must be a JSON object",
                                  field="config")
        for key in value:
            if key not in _KEYS:
                raise ValidationError(
                    f"unknown key {key!r}{where}; expected some of {', '.join(_KEYS)}",
                    field=str(key),
                )
        embedder = value.get("embedder")
        if embedder is not None and embedder not in EMBEDDERS:
            raise ValidationError(
                f"must be null or one of {', '.join(EMBEDDERS)}{where}, not {embedder!r}",
                field="embedder",
            )
        command, timeout = _extractor(value.get("extractor", "rules"), where)
        tokens = value.get("prompt_tokens", 300)
        lo, hi = _PROMPT_TOKENS
        if type(tokens) is not int or not lo <= tokens <= hi:
            raise ValidationError(
                f"must be an integer from {lo} to {hi}{where}, not {tokens!r}",
                field="prompt_tokens",
            )
        return cls(embedder, command, timeout, tokens, source)

    def make_embedder(self) -> Embedder | None:
        """The configured embedder (its model loaded on first use), or None."""
        if self.embedder is None:
            return None
        from ... import embed

        makers = {
            "static": embed.StaticEmbedder,
            "local": embed.LocalEmbedder,
            "torch": embed.TorchEmbedder,
            "hash": embed.HashEmbedder,
        }
        made: Embedder = makers[self.embedder]()
        return made

    def make_extractor(self) -> Extractor | None:
        """The configured extractor, or None for the rule extractor (``ingest``'s default)."""
        if self.extractor_command is None:
            return None
        from ...extract import CommandExtractor

        return CommandExtractor(self.extractor_command, timeout=self.extractor_timeout)


def _extractor(value: object, where: str) -> tuple[tuple[str, ...] | None, float]:
    if value == "rules":
        return None, 300.0
    if not isinstance(value, Mapping) or not set(value) <= {"command", "timeout"}:
        raise ValidationError(
            f'must be "rules" or {{"command": [...], "timeout": seconds}}{where}',
            field="extractor",
        )
    command = value.get("command")
    if (
        not isinstance(command, list)
        or not command
        or not all(isinstance(part, str) and part for part in command)
    ):
        raise ValidationError(
            f"must be a non-empty list of non-empty strings{where}", field="extractor.command"
        )
    timeout = value.get("timeout", 300)
    if type(timeout) not in (int, float) or not 0 < timeout <= 86_400:
        raise ValidationError(
            f"must be a number of seconds from 0 to 86400{where}", field="extractor.timeout"
        )
    return tuple(command), float(timeout)


def load_config(
    project: str | os.PathLike[str], environ: Mapping[str, str] | None = None
) -> PluginConfig:
    """The settings for ``project``: its ``.memory/config.json``, else the global
    directory's, else the defaults.

    Raises:
        ValidationError: the file is not valid JSON or has a bad key or value.
    """
    for folder in (project_store(project).root, global_store(environ).root):
        path = folder / CONFIG_NAME
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except OSError as error:
            raise ValidationError(f"{path} cannot be read: {error}", field="config") from None
        try:
            parsed: Any = json.loads(text)
        except ValueError as error:
            raise ValidationError(f"{path} is not valid JSON: {error}", field="config") from None
        return PluginConfig.from_json(parsed, path)
    return PluginConfig()
