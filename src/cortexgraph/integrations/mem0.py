"""A mem0-compatible ``Memory``: mem0's open-source API, answered by cortexgraph stores.

Code written against mem0 2.x switches by changing one import::

    from cortexgraph.integrations.mem0 import Memory   # instead of: from mem0 import Memory

The methods keep mem0's names, keyword arguments and return shapes (``add`` ->
``{"results": [{"id", "memory", "event"}]}``, ``search`` / ``get_all`` -> ``{"results":
[...]}`` of memory dicts, ``history`` -> a list of change dicts), and raise ``ValueError``
where mem0 does: every error here is a typed cortexgraph error, and the ones mem0 raises as
``ValueError`` are :class:`~cortexgraph.ValidationError` (a ``ValueError``) with mem0's
message. mem0 itself is not needed and never imported. The guide is the ``mem0`` section of
``docs/integrations.md``.

How mem0's notions map onto cortexgraph:

- **Scope.** ``user_id`` names the actor (one store per actor under the root); without it,
  ``agent_id`` does; with neither, the memories of a run live in the actor ``mem0``. When
  both are given the store is the user's and ``agent_id`` is recorded on each memory and
  filtered on, so ``filters={"agent_id": ...}`` alone looks only in the agent's own store.
  ``run_id`` is the namespace (``default`` without one). Actor and namespace names follow
  cortexgraph's rule (1-64 of ``a-z 0-9 . _ -``); an id outside it is a ``ValidationError``.
- **Ids.** A memory's id is its head URI, ``cx://<actor>/<ns>/<id hex>``, so ``get``,
  ``update``, ``delete`` and ``history`` find the store from the id alone.
- **Memories.** Each memory is a typed cortexgraph memory tagged ``mem0`` and ``h-<md5 of
  its text>`` (mem0's ``hash``). What mem0 keeps in the payload besides the text (the ids,
  ``role``, ``actor_id`` and the caller's ``metadata``) is a JSON payload in a companion
  :class:`~cortexgraph.ArtifactRef` in the namespace ``mem0-meta``, tagged ``of-<id hex>``
  and written, updated and tombstoned in the same batch as its memory.
- **add.** ``infer=True`` runs the configured :class:`~cortexgraph.extract.Extractor`
  (the :class:`~cortexgraph.extract.RuleExtractor` by default) over the messages instead of
  an LLM; each candidate becomes a memory of its type. A text already stored in the same
  scope is not written again: it is reported with event ``NONE`` and the existing id (mem0
  2.x drops such duplicates silently; reporting them tells the caller which memory holds
  the fact). ``infer=False`` stores each non-system message as a ``Fact``, as mem0 does.
- **Times.** ``created_at`` and ``updated_at`` are ISO 8601 UTC strings of the journal
  times of the first and the head version; ``history`` is read from the versions and the
  journal: ``ADD`` for version 1, ``UPDATE`` for each later version (old and new text),
  ``DELETE`` for the tombstone. Deleting tombstones, so the audit trail stays; ``reset``
  tombstones every mem0 memory under the root.
- **search.** Hybrid recall (keyword and vector, score fusion, scores in 0..1) inside the
  scope, then mem0's filter operators over the payload, then ``threshold`` and ``top_k``.
- **Expiration.** ``expiration_date`` is kept in the payload; ``search`` and ``get_all``
  leave out a memory past it (by the configured clock) unless ``show_expired=True``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import cortexgraph as cg

__all__ = ["Memory"]

MEM0_TAG = "mem0"
"""The tag every memory written through this API carries."""
META_NS = "mem0-meta"
"""The namespace of the payload companions."""
RUN_ACTOR = "mem0"
"""The actor of memories scoped by ``run_id`` alone."""
DEFAULT_NS = "default"
_ENTITY_KEYS = ("user_id", "agent_id", "run_id")
_IDENTITY = frozenset({*_ENTITY_KEYS, "actor_id"})
"""Keys caller metadata may not set (mem0 drops them too: the scope comes from the ids)."""
_PROMOTED = ("user_id", "agent_id", "run_id", "actor_id", "role", "expiration_date")
_UNSET: Any = object()
_SCAN = 100_000
"""The most memories one scan (``get_all``, ``delete_all``, ``reset``) looks at per store."""
_RECALL_MAX = 1000
_CONFIG_KEYS = frozenset({"root", "extractor", "embedder", "clock", "sync"})
_OPERATORS = frozenset(
    {"eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains", "icontains"}
)
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()


def _expiration(value: object) -> str | None:
    """mem0's ``expiration_date``: a date (or ``YYYY-MM-DD``) as ``YYYY-MM-DD``, or ``None``."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str):
        try:
            return date.fromisoformat(value).isoformat()
        except ValueError:
            pass
    raise cg.ValidationError(
        "expiration_date must be a valid date in YYYY-MM-DD format.", field="expiration_date"
    )


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def _scope_ids(
    user_id: object, agent_id: object, run_id: object, *, missing: str
) -> dict[str, str | None]:
    """The checked ``user_id``, ``agent_id`` and ``run_id`` of a call that needs at least
    one of them (``missing`` is mem0's message when none is given)."""
    ids = {
        "user_id": _entity_id(user_id, "user_id"),
        "agent_id": _entity_id(agent_id, "agent_id"),
        "run_id": _entity_id(run_id, "run_id"),
    }
    if not any(ids.values()):
        raise cg.ValidationError(missing, field="user_id")
    return ids


def _entity_id(value: object, name: str) -> str | None:
    """mem0's entity id check (strings, trimmed, no whitespace), then cortexgraph's name rule."""
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else str(value).strip()
    if not text:
        raise cg.ValidationError(
            f"Invalid {name}: cannot be empty or whitespace-only. Provide a valid identifier.",
            field=name,
        )
    if any(c.isspace() for c in text):
        raise cg.ValidationError(
            f"Invalid {name}: cannot contain whitespace. Provide a valid identifier without"
            " spaces.",
            field=name,
        )
    if not _NAME.fullmatch(text):
        raise cg.ValidationError(
            f"{text!r} is not a valid cortexgraph name (1-64 of a-z 0-9 . _ -, starting with a"
            " letter or digit)",
            field=name,
        )
    if name == "run_id" and text == META_NS:
        raise cg.ValidationError(f"{META_NS!r} is reserved for the payloads", field=name)
    return text


class _Scope:
    """The store and namespace a set of entity ids selects, and the ids themselves."""

    def __init__(self, ids: Mapping[str, str | None]) -> None:
        self.ids = {k: v for k, v in ids.items() if v is not None}
        self.actor = ids.get("user_id") or ids.get("agent_id") or RUN_ACTOR
        run = ids.get("run_id")
        self.ns = run if run is not None else DEFAULT_NS

    def matches(self, payload: Mapping[str, Any]) -> bool:
        return all(payload.get(k) == v for k, v in self.ids.items())


def _scope_of(filters: object) -> tuple[_Scope, dict[str, Any]]:
    """The scope ``filters`` name and the rest of them; mem0's error without an entity id."""
    if filters is not None and not isinstance(filters, dict):
        raise cg.ValidationError("must be a dict", field="filters")
    rest = dict(filters or {})
    ids = {key: _entity_id(rest.pop(key), key) for key in _ENTITY_KEYS if key in rest}
    if not any(ids.values()):
        raise cg.ValidationError(
            "filters must contain at least one of: user_id, agent_id, run_id. "
            "Example: filters={'user_id': 'u1'}",
            field="filters",
        )
    _check_filters(rest)
    return _Scope(ids), rest


def _check_filters(filters: Mapping[str, Any]) -> None:
    """Refuse unknown operators and malformed logical lists up front, as mem0 does."""
    for key, value in filters.items():
        if key in ("AND", "OR", "NOT"):
            if not isinstance(value, list) or not value or not all(
                isinstance(c, dict) for c in value
            ):
                raise cg.ValidationError(
                    f"{key} operator requires a non-empty list of conditions", field="filters"
                )
            for condition in value:
                _check_filters(condition)
        elif isinstance(value, dict):
            for op in value:
                if op not in _OPERATORS:
                    raise cg.ValidationError(
                        f"Unsupported metadata filter operator: {op}", field="filters"
                    )


def _compare(value: Any, op: str, operand: Any) -> bool:
    if op == "eq":
        return bool(value == operand)
    if op == "ne":
        return bool(value != operand)
    if op in ("in", "nin"):
        found = isinstance(operand, (list, tuple, set)) and value in operand
        return found if op == "in" else not found
    if op in ("contains", "icontains"):
        if not isinstance(value, str) or not isinstance(operand, str):
            return False
        return operand.lower() in value.lower() if op == "icontains" else operand in value
    if value is None:
        return False
    try:
        if op == "gt":
            return bool(value > operand)
        if op == "gte":
            return bool(value >= operand)
        if op == "lt":
            return bool(value < operand)
        return bool(value <= operand)
    except TypeError:  # an ordering between unrelated types matches nothing
        return False


def _matches(view: Mapping[str, Any], filters: Mapping[str, Any]) -> bool:
    """Whether a memory's flattened payload satisfies mem0-style ``filters``."""
    for key, condition in filters.items():
        if key == "AND":
            ok = all(_matches(view, c) for c in condition)
        elif key == "OR":
            ok = any(_matches(view, c) for c in condition)
        elif key == "NOT":
            ok = not any(_matches(view, c) for c in condition)
        elif condition == "*":
            ok = key in view
        elif isinstance(condition, dict):
            ok = key in view and all(_compare(view[key], op, v) for op, v in condition.items())
        else:
            ok = key in view and view[key] == condition
        if not ok:
            return False
    return True


def _messages(messages: object) -> list[dict[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, dict):
        return [messages]
    if isinstance(messages, list):
        return messages
    raise cg.ValidationError(
        f"messages must be str, dict, or list[dict], not {type(messages).__name__}",
        field="messages",
    )


def _payload_json(payload: Mapping[str, Any]) -> str:
    try:
        return json.dumps(payload, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise cg.ValidationError(
            f"must hold only JSON values: {error}", field="metadata"
        ) from None


class Memory:
    """mem0's ``Memory`` over cortexgraph stores (one per actor under a root).

    Args:
        config: ``None`` or a mem0 config dict. Its ``"cortexgraph"`` entry configures this
            adapter: ``root`` (the directory of the stores; default ``$CORTEXGRAPH_ROOT`` or
            ``.cortexgraph``), ``extractor`` (what ``add(infer=True)`` runs; default
            :class:`~cortexgraph.extract.RuleExtractor`), ``embedder`` and ``clock``
            (passed to :func:`cortexgraph.open`) and ``sync`` (fsync each commit; default
            true). mem0's own sections (``llm``, ``embedder``, ``vector_store``, ...) are
            accepted and ignored: nothing here calls a model.

    Raises:
        ValidationError: a config or ``"cortexgraph"`` entry that is not a dict, an
            unknown key in that entry, a root that is not a path, an extractor without
            ``extract``.
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        if config is not None and not isinstance(config, Mapping):
            raise cg.ValidationError("must be a dict or None", field="config")
        section = (config or {}).get("cortexgraph") or {}
        if not isinstance(section, Mapping):
            raise cg.ValidationError("must be a dict", field="config.cortexgraph")
        ours = dict(section)
        unknown = sorted(set(ours) - _CONFIG_KEYS)
        if unknown:
            raise cg.ValidationError(
                f"unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_CONFIG_KEYS))}",
                field="config.cortexgraph",
            )
        root = ours.get("root") or os.environ.get("CORTEXGRAPH_ROOT", ".cortexgraph")
        if not isinstance(root, str | os.PathLike):
            raise cg.ValidationError(
                f"must be a path, not {type(root).__name__}", field="config.cortexgraph.root"
            )
        self.root = Path(root)
        if "extractor" in ours:
            if not callable(getattr(ours["extractor"], "extract", None)):
                raise cg.ValidationError(
                    "must have an extract(ExtractionInput) method",
                    field="config.cortexgraph.extractor",
                )
            self.extractor = ours["extractor"]
        else:
            from cortexgraph.extract import RuleExtractor

            self.extractor = RuleExtractor()
        self._clock: cg.Clock = ours.get("clock") or cg.SystemClock()
        self._open_args = {
            k: ours[k] for k in ("embedder", "clock", "sync") if ours.get(k) is not None
        }
        self._stores: dict[str, cg.Cortex] = {}

    @classmethod
    def from_config(cls, config_dict: Mapping[str, Any]) -> Memory:
        """A ``Memory`` built from a mem0 config dict (see the class docstring)."""
        return cls(config_dict)

    # -- stores ---------------------------------------------------------------------------

    def cortex(self, actor: str) -> cg.Cortex:
        """The cortexgraph handle of ``actor``'s store, for the rest of the API (``context``,
        ``scope``, ``prove``, ...). It is opened (and created) on first use and stays open
        until :meth:`close`; LMDB allows one handle per store and process, so use this one.

        Raises:
            ValidationError: ``actor`` is not a valid actor name.
        """
        cx = self._stores.get(actor)
        if cx is None:
            cx = cg.open(self.root, actor, **self._open_args)
            self._stores[actor] = cx
        return cx

    def _today(self) -> str:
        """Today's UTC date by the configured clock, as ``YYYY-MM-DD``."""
        return datetime.fromtimestamp(self._clock.now_ms() / 1000, tz=UTC).date().isoformat()

    def _existing(self, actor: str) -> cg.Cortex | None:
        """The store of ``actor`` if it exists (reads never create one)."""
        if actor not in self._stores and not (self.root / actor).is_dir():
            return None
        return self.cortex(actor)

    def close(self) -> None:
        """Close every store this instance opened."""
        stores, self._stores = self._stores, {}
        for cx in stores.values():
            cx.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _locate(self, memory_id: object) -> tuple[cg.Cortex, cg.Record] | None:
        """The store and head record of an active mem0 memory, or ``None``."""
        if not isinstance(memory_id, str):
            raise cg.ValidationError(
                f"must be a memory id string, not {type(memory_id).__name__}", field="memory_id"
            )
        uri = cg.MemoryURI.parse(memory_id)
        cx = self._existing(uri.actor)
        if cx is None:
            return None
        try:
            record = cx.resolve(uri.head)
        except cg.NotFoundError:
            return None
        if (
            record.status != "active"
            or record.uri.ns != uri.ns
            or MEM0_TAG not in record.memory.tags
        ):
            return None
        return cx, record

    @staticmethod
    def _companion(cx: cg.Cortex, record: cg.Record) -> tuple[cg.Record | None, dict[str, Any]]:
        """The payload companion of ``record`` and its payload (tombstoned with a deleted one)."""
        where = cg.Q.tag(f"of-{record.uri.id.hex()}") & cg.Q.ns(META_NS)
        if record.status == "tombstoned":
            where = where & cg.Q.status("tombstoned")
        found = cx.find(where, limit=1)
        if not found.hits:
            return None, {}
        companion = found.hits[0].record
        content = getattr(companion.memory, "content", None) or "{}"
        try:
            payload = json.loads(content)
        except ValueError:
            raise cg.CorruptionError(
                f"the mem0 payload {companion.uri} is not JSON", table="versions", operation="mem0"
            ) from None
        return companion, payload

    @staticmethod
    def _item(
        record: cg.Record,
        companion: cg.Record | None,
        payload: Mapping[str, Any],
        *,
        score: float | None = None,
        with_score: bool = True,
    ) -> dict[str, Any]:
        """mem0's memory dict: its ``MemoryItem`` fields in mem0's order, the promoted ids,
        then metadata. ``updated_at`` is the later of the memory's and its payload's last
        change (a metadata-only update moves it, as in mem0)."""
        updated = record.at if companion is None else max(record.at, companion.at)
        item: dict[str, Any] = {
            "id": str(record.uri.head),
            "memory": record.memory.text,
            "hash": _md5(record.memory.text),
            "metadata": None,
        }
        if with_score:
            item["score"] = score
        item["created_at"] = _iso(record.created_at)
        item["updated_at"] = _iso(updated)
        for key in _PROMOTED:
            if key in payload:
                item[key] = payload[key]
        if payload.get("metadata"):
            item["metadata"] = dict(payload["metadata"])
        return item

    @staticmethod
    def _view(payload: Mapping[str, Any]) -> dict[str, Any]:
        """The flat dict filters look at: the metadata keys beside the promoted ones."""
        view = dict(payload.get("metadata") or {})
        view.update({k: payload[k] for k in _PROMOTED if k in payload})
        return view

    # -- writes ---------------------------------------------------------------------------

    def add(
        self,
        messages: str | dict[str, Any] | list[dict[str, Any]],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        timestamp: Any = None,
        expiration_date: Any = None,
        infer: bool = True,
        memory_type: str | None = None,
        prompt: str | None = None,
    ) -> dict[str, list[dict[str, Any]]]:
        """Remember ``messages`` in the scope of the given ids (at least one is required).

        Args:
            messages: a string (a user message), a ``{"role", "content"}`` dict or a list
                of them.
            user_id, agent_id, run_id: the scope (see the module docstring).
            metadata: JSON values stored with each memory (identity keys in it are
                dropped, as mem0 does).
            timestamp: mem0's platform-only parameter; the OSS API refuses it, so does this.
            expiration_date: a date (``YYYY-MM-DD``) from the day after which ``search``
                and ``get_all`` hide the memory unless asked with ``show_expired=True``.
            infer: run the extractor (``True``) or store each message as is.
            memory_type: mem0's ``"procedural_memory"`` needs an LLM summary and is
                refused; any other value is mem0's validation error.
            prompt: accepted for compatibility (the extractor takes no prompt).

        Returns:
            ``{"results": [{"id", "memory", "event"}]}``, ``event`` being ``ADD`` or
            ``NONE`` (already stored; ``id`` is the existing memory). With ``infer=False``
            each result also has ``role`` and ``actor_id`` (the message's ``name``).

        Raises:
            ValidationError: no entity id, a bad id, messages or metadata.
        """
        ids = _scope_ids(
            user_id,
            agent_id,
            run_id,
            missing="At least one of 'user_id', 'agent_id', or 'run_id' must be provided.",
        )
        if timestamp is not None:
            raise cg.ValidationError(
                "timestamp is a mem0 platform feature, not part of the open-source API",
                field="timestamp",
            )
        expires = _expiration(expiration_date)
        if memory_type is not None:
            raise cg.ValidationError(
                "procedural memories need an LLM summary, which this API does not call"
                if memory_type == "procedural_memory"
                else "Invalid 'memory_type'. Please pass procedural_memory to create"
                " procedural memories.",
                field="memory_type",
            )
        if type(infer) is not bool:
            raise cg.ValidationError("must be True or False", field="infer")
        if metadata is not None and not isinstance(metadata, dict):
            raise cg.ValidationError("must be a dict or None", field="metadata")
        extra = {k: v for k, v in (metadata or {}).items() if k not in _IDENTITY}
        scope = _Scope(ids)
        base: dict[str, Any] = dict(scope.ids)
        if extra:
            base["metadata"] = extra
        if expires is not None:
            base["expiration_date"] = expires
        _payload_json(base)
        turns = [m for m in _messages(messages) if isinstance(m, dict)]
        planned = self._plan(turns, base, infer)
        cx = self.cortex(scope.actor)
        results: list[dict[str, Any]] = []
        if not planned:
            return {"results": results}
        known = {
            digest: self._duplicate(cx, scope, digest)
            for digest in {_md5(memory.text) for memory, _, _ in planned}
        }
        with cx.batch() as batch:
            for memory, payload, extras in planned:
                # mem0's key order: id, memory, event, then what infer=False adds
                result = {"memory": memory.text}
                digest = _md5(memory.text)
                existing = known[digest]
                if existing is not None:
                    results.append({"id": existing, **result, "event": "NONE", **extras})
                    continue
                tagged = _with_tags(memory, (MEM0_TAG, f"h-{digest}"))
                uri = batch.write(tagged, ns=scope.ns)
                batch.write(_companion_of(uri, payload), ns=META_NS)
                known[digest] = str(uri.head)
                results.append({"id": str(uri.head), **result, "event": "ADD", **extras})
        return {"results": results}

    def _plan(
        self, turns: list[dict[str, Any]], base: dict[str, Any], infer: bool
    ) -> list[tuple[cg.Memory, dict[str, Any], dict[str, Any]]]:
        """The memories ``add`` would write, each with its payload and its result's extra keys."""
        from cortexgraph.extract import Candidate, ExtractionInput, RuleExtractor, Turn

        planned: list[tuple[cg.Memory, dict[str, Any], dict[str, Any]]] = []
        if not infer:
            for message in turns:
                role, content = message.get("role"), message.get("content")
                if role is None or content is None or role == "system":
                    continue
                payload = dict(base, role=role)
                name = message.get("name")
                if name:
                    payload["actor_id"] = name
                memory = cg.Fact(text=content, source=cg.Source(origin="human"))
                planned.append((memory, payload, {"actor_id": name or None, "role": role}))
            return planned
        conversation = [
            Turn(str(m.get("role")), str(m.get("content")))
            for m in turns
            if m.get("role") in ("user", "assistant", "tool") and isinstance(m.get("content"), str)
        ]
        candidates = self.extractor.extract(ExtractionInput(conversation))
        if not isinstance(candidates, list) or not all(
            isinstance(c, Candidate) for c in candidates
        ):
            raise cg.ValidationError(
                "the extractor must return a list of Candidate records", field="candidates"
            )
        source = cg.Source(origin="system" if isinstance(self.extractor, RuleExtractor) else "llm")
        for candidate in candidates:
            planned.append((candidate.to_memory(source), dict(base), {}))
        return planned

    def _duplicate(self, cx: cg.Cortex, scope: _Scope, digest: str) -> str | None:
        """The id of an active memory with the same text and exactly the same ids, if any."""
        for hit in cx.find(cg.Q.tag(f"h-{digest}") & cg.Q.ns(scope.ns), limit=16).hits:
            payload = self._companion(cx, hit.record)[1]
            if {k: payload[k] for k in _ENTITY_KEYS if k in payload} == scope.ids:
                return str(hit.uri.head)
        return None

    def update(
        self,
        memory_id: str,
        text: str | None = None,
        metadata: dict[str, Any] | None = None,
        expiration_date: Any = _UNSET,
    ) -> dict[str, str]:
        """Replace a memory's text, merge into its metadata and/or set or clear (``None``)
        its expiration date; the ids stay as they are.

        Returns:
            ``{"message": "Memory updated successfully!"}``.

        Raises:
            ValidationError: none of ``text``, ``metadata`` and ``expiration_date``, no
                such memory (mem0's message), a bad text, metadata or date.
        """
        if text is None and metadata is None and expiration_date is _UNSET:
            raise cg.ValidationError(
                "At least one of text, metadata, or expiration_date must be provided.",
                field="text",
            )
        if text is not None and not isinstance(text, str):
            raise cg.ValidationError(f"must be a string, not {type(text).__name__}", field="text")
        if metadata is not None and not isinstance(metadata, dict):
            raise cg.ValidationError("must be a dict or None", field="metadata")
        located = self._locate(memory_id)
        if located is None:
            raise cg.ValidationError(
                f"Memory with id {memory_id} not found. Please provide a valid 'memory_id'",
                field="memory_id",
            )
        cx, record = located
        companion, payload = self._companion(cx, record)
        if metadata is not None:
            merged = dict(payload.get("metadata") or {})
            merged.update({k: v for k, v in metadata.items() if k not in _IDENTITY})
            payload = {**payload, "metadata": merged}
        if expiration_date is not _UNSET:
            expires = _expiration(expiration_date)
            payload = {k: v for k, v in payload.items() if k != "expiration_date"}
            if expires is not None:
                payload["expiration_date"] = expires
        content = _payload_json(payload)
        with cx.batch() as batch:
            if text is not None and text != record.memory.text:
                tags = [t for t in record.memory.tags if not t.startswith("h-")]
                batch.update(record.uri, text=text, tags=[*tags, f"h-{_md5(text)}"])
            if metadata is not None or expiration_date is not _UNSET:
                if companion is None:
                    batch.write(_companion_of(record.uri, payload), ns=META_NS)
                elif content != getattr(companion.memory, "content", None):
                    batch.update(companion.uri, content=content)
        return {"message": "Memory updated successfully!"}

    def delete(self, memory_id: str) -> dict[str, str]:
        """Tombstone a memory and its payload (the versions stay in the journal).

        Raises:
            ValidationError: no such memory (mem0's message).
        """
        located = self._locate(memory_id)
        if located is None:
            raise cg.ValidationError(f"Memory with id {memory_id} not found", field="memory_id")
        cx, record = located
        companion, _ = self._companion(cx, record)
        with cx.batch() as batch:
            batch.tombstone(record.uri, reason="mem0 delete")
            if companion is not None:
                batch.tombstone(companion.uri, reason="mem0 delete")
        return {"message": "Memory deleted successfully!"}

    def delete_all(
        self,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> dict[str, str]:
        """Tombstone every memory of the scope the ids name (at least one is required).

        Raises:
            ValidationError: no id (mem0's message), or a bad one.
        """
        ids = _scope_ids(
            user_id,
            agent_id,
            run_id,
            missing="At least one filter is required to delete all memories. If you want to"
            " delete all memories, use the `reset()` method.",
        )
        scope = _Scope(ids)
        cx = self._existing(scope.actor)
        if cx is not None:
            self._tombstone_all(cx, self._scan(cx, scope, {}))
        return {"message": "Memories deleted successfully!"}

    def reset(self) -> None:
        """Tombstone every mem0 memory of every store under the root (the journal keeps them)."""
        if not self.root.is_dir():
            return
        for path in sorted(self.root.iterdir()):
            if path.is_dir() and _NAME.fullmatch(path.name):
                cx = self._existing(path.name)
                if cx is not None:
                    self._tombstone_all(cx, self._scan(cx, None, {}))

    @staticmethod
    def _tombstone_all(
        cx: cg.Cortex, found: Iterable[tuple[cg.Record, cg.Record | None, dict[str, Any]]]
    ) -> None:
        rows = list(found)
        if not rows:
            return
        with cx.batch() as batch:
            for record, companion, _ in rows:
                batch.tombstone(record.uri, reason="mem0 delete_all")
                if companion is not None:
                    batch.tombstone(companion.uri, reason="mem0 delete_all")

    # -- reads ----------------------------------------------------------------------------

    def _scan(
        self,
        cx: cg.Cortex,
        scope: _Scope | None,
        filters: Mapping[str, Any],
        *,
        show_expired: bool = True,
    ) -> Iterable[tuple[cg.Record, cg.Record | None, dict[str, Any]]]:
        """The active mem0 memories of ``cx`` in ``scope`` matching ``filters``, newest first."""
        today = self._today()
        for hit in cx.find(_where(scope), limit=_SCAN, order_by="recent").hits:
            companion, payload = self._companion(cx, hit.record)
            if scope is not None and not scope.matches(payload):
                continue
            if not show_expired and _expired(payload, today):
                continue
            if _matches(self._view(payload), filters):
                yield hit.record, companion, payload

    def get(self, memory_id: str) -> dict[str, Any] | None:
        """The memory ``memory_id`` names as mem0's dict, or ``None`` if there is none.

        Raises:
            URIError: ``memory_id`` is not a memory id this API hands out.
        """
        located = self._locate(memory_id)
        if located is None:
            return None
        cx, record = located
        return self._item(record, *self._companion(cx, record))

    def get_all(
        self,
        *,
        filters: dict[str, Any] | None = None,
        top_k: int = 20,
        show_expired: bool = False,
        **kwargs: Any,
    ) -> dict[str, list[dict[str, Any]]]:
        """The newest ``top_k`` memories of the scope in ``filters`` that satisfy them.

        Memories past their ``expiration_date`` are left out unless ``show_expired``.

        Raises:
            ValidationError: ``filters`` without user_id, agent_id or run_id, an unknown
                operator, a bad ``top_k``, or entity ids passed as keywords (mem0's
                messages).
        """
        _reject_entity_kwargs(kwargs, "get_all")
        _check_top_k(top_k)
        scope, rest = _scope_of(filters)
        cx = self._existing(scope.actor)
        results: list[dict[str, Any]] = []
        if cx is not None:
            for record, companion, payload in self._scan(
                cx, scope, rest, show_expired=show_expired
            ):
                if len(results) >= top_k:
                    break
                results.append(self._item(record, companion, payload, with_score=False))
        return {"results": results}

    def search(
        self,
        query: str,
        *,
        top_k: int = 20,
        filters: dict[str, Any] | None = None,
        threshold: float = 0.1,
        rerank: bool = False,
        explain: bool = False,
        show_expired: bool = False,
        **kwargs: Any,
    ) -> dict[str, list[dict[str, Any]]]:
        """The memories of the scope in ``filters`` most relevant to ``query``, best first.

        Args:
            query: what to look for.
            top_k: the most results.
            filters: ``user_id`` / ``agent_id`` / ``run_id`` (one is required) and mem0's
                metadata operators: a value (equality), ``"*"`` (present), ``{"eq" | "ne"
                | "gt" | "gte" | "lt" | "lte" | "in" | "nin" | "contains" | "icontains":
                v}``, and ``AND`` / ``OR`` / ``NOT`` lists of such dicts.
            threshold: the lowest score (0..1) a result may have.
            rerank: accepted for compatibility; no reranker is configured (as in mem0
                without one).
            explain: add ``score_details``: each recall channel's own score.
            show_expired: include memories past their ``expiration_date``.

        Returns:
            ``{"results": [...]}``: mem0's memory dicts with ``score``.

        Raises:
            ValidationError: the cases of :meth:`get_all`, a bad threshold or query.
        """
        _reject_entity_kwargs(kwargs, "search")
        _check_top_k(top_k)
        if type(threshold) not in (int, float) or not 0 <= threshold <= 1:
            raise cg.ValidationError(
                f"Invalid threshold: {threshold!r}. Must be between 0 and 1 (inclusive).",
                field="threshold",
            )
        if not isinstance(query, str) or not query.strip():
            raise cg.ValidationError(
                "Invalid query: must be a non-empty string.", field="query"
            )
        scope, rest = _scope_of(filters)
        cx = self._existing(scope.actor)
        if cx is None or top_k == 0:
            return {"results": []}
        k = min(_RECALL_MAX, max(4 * top_k, 50))
        hits = cx.recall(query.strip(), k=k, where=_where(scope), expand=False).hits
        results: list[dict[str, Any]] = []
        today = self._today()
        for hit in hits:
            if hit.score < threshold:
                continue
            companion, payload = self._companion(cx, hit.record)
            if not show_expired and _expired(payload, today):
                continue
            if scope.matches(payload) and _matches(self._view(payload), rest):
                item = self._item(hit.record, companion, payload, score=float(hit.score))
                if explain:
                    item["score_details"] = dict(hit.scores)
                results.append(item)
                if len(results) >= top_k:
                    break
        return {"results": results}

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """The changes of a memory, oldest first, read from its versions and the journal.

        Each is mem0's history dict: ``id`` (``<actor>:<journal seq>``), ``memory_id``,
        ``old_memory``, ``new_memory``, ``event`` (``ADD``, ``UPDATE``, ``DELETE``),
        ``created_at``, ``updated_at``, ``is_deleted``, ``actor_id`` and ``role``. A
        deleted memory keeps its history; an unknown id has none. A metadata-only update
        is an ``UPDATE`` whose old and new memory are the same text, as in mem0.

        Raises:
            URIError: ``memory_id`` is not a memory id this API hands out.
        """
        if not isinstance(memory_id, str):
            raise cg.ValidationError("must be a memory id string", field="memory_id")
        uri = cg.MemoryURI.parse(memory_id).head
        cx = self._existing(uri.actor)
        if cx is None:
            return []
        try:
            versions = cx.history(uri)
        except cg.NotFoundError:
            return []
        if MEM0_TAG not in versions[0].memory.tags or versions[0].uri.ns != uri.ns:
            return []
        companion, payload = self._companion(cx, versions[-1])
        # Payload versions after the first are metadata changes; one written in the same
        # batch as a text change (the entry right after it) belongs to that change's row.
        changes: list[tuple[int, int, cg.Record | None]] = [(v.seq, v.at, v) for v in versions]
        if companion is not None:
            text_seqs = {v.seq for v in versions}
            changes += [
                (p.seq, p.at, None)
                for p in cx.history(companion.uri)[1:]
                if p.seq - 1 not in text_seqs
            ]
        created = _iso(versions[0].created_at)
        rows: list[dict[str, Any]] = []

        def row(seq: int, old: str | None, new: str | None, event: str, at: int) -> None:
            rows.append(
                {
                    "id": f"{uri.actor}:{seq}",
                    "memory_id": memory_id,
                    "old_memory": old,
                    "new_memory": new,
                    "event": event,
                    "created_at": created,
                    "updated_at": _iso(at),
                    "is_deleted": event == "DELETE",
                    "actor_id": payload.get("actor_id"),
                    "role": payload.get("role"),
                }
            )

        previous: str | None = None
        for seq, at, version in sorted(changes, key=lambda change: change[0]):
            text = previous if version is None else version.memory.text
            event = "ADD" if version is not None and version.version == 1 else "UPDATE"
            row(seq, previous, text, event, at)
            previous = text
        if versions[-1].status == "tombstoned":
            for entry in cx.journal(since=versions[-1].seq):
                if entry.op == "tombstone" and entry.memory_id == uri.id:
                    row(entry.seq, previous, None, "DELETE", entry.at)
                    break
        return rows


def _expired(payload: Mapping[str, Any], today: str) -> bool:
    """Whether the memory's expiration date (ISO dates compare as strings) is past."""
    expires = payload.get("expiration_date")
    return isinstance(expires, str) and expires < today


def _where(scope: _Scope | None) -> Any:
    """The predicate of the mem0 memories of ``scope`` (its namespace when it names a run)."""
    if scope is not None and "run_id" in scope.ids:
        return cg.Q.tag(MEM0_TAG) & cg.Q.ns(scope.ns)
    return cg.Q.tag(MEM0_TAG)


def _with_tags(memory: cg.Memory, extra: Iterable[str]) -> cg.Memory:
    import attrs

    return attrs.evolve(memory, tags=(*memory.tags, *extra))


def _companion_of(uri: cg.MemoryURI, payload: Mapping[str, Any]) -> cg.ArtifactRef:
    return cg.ArtifactRef(
        text=f"mem0 payload of {uri.id.hex()}",
        media_type="application/json",
        content=_payload_json(payload),
        tags=("mem0-meta", f"of-{uri.id.hex()}"),
        priority=1,
    )


def _reject_entity_kwargs(kwargs: Mapping[str, Any], method: str) -> None:
    entity = sorted(set(kwargs) & set(_ENTITY_KEYS))
    if entity:
        raise cg.ValidationError(
            f"Top-level entity parameters {set(entity)} are not supported in {method}(). "
            "Use filters={'user_id': '...'} instead.",
            field=entity[0],
        )
    if kwargs:
        unexpected = ", ".join(sorted(kwargs))
        raise TypeError(f"{method}() got unexpected keyword argument(s): {unexpected}")


def _check_top_k(top_k: object) -> None:
    if type(top_k) is not int or top_k < 0:
        raise cg.ValidationError(
            f"Invalid top_k: {top_k!r}. Must be a non-negative integer.", field="top_k"
        )

