"""Agent event files into memory: idempotent, resumable ingestion and a tail that follows.

An agent process manager writes one JSON Lines file per run (see ``docs/agents.md``)::

    DIR/<name>/<ts>_active.jsonl    the run is going on (lines are being appended)
    DIR/<name>/<ts>.jsonl           the run finished (the file was renamed)

Each line is a JSON object with ``event`` (request, start, tool_start, tool_end, thinking,
agent_updated, finish, error, info), a millisecond ``ts`` and ``agent_id`` (the ``<ts>`` of
the file name). What the store records, every write at the event's own ``ts``:

- one :class:`~cortexgraph.Event` per run (``kind="run"``): the prompt as text, tagged
  ``agent-run``, ``agent-<name>``, ``run-<agent_id>``, ``provider-<p>``, ``model-<m>`` and
  its state (``running``, then ``finished`` or ``failed``), in the namespace named by the
  request's ``facet`` (``ns`` otherwise);
- each tool call as an Event (``kind="tool_call"``, its ``call_id``), written at
  ``tool_start`` and completed at the ``tool_end`` with the same ``call_id`` (concurrent
  calls pair correctly): ``valid_from``/``valid_to`` hold the start and end, so the
  duration is their difference; it ``relates_to`` its run;
- the ``finish`` result as a :class:`~cortexgraph.Fact` ``derived_from`` the run;
- each ``error`` as an Event tagged ``error`` that ``relates_to`` the run;
- continuations: a run whose request or start names a ``session_id`` is ``derived_from``
  the latest earlier run of that session, and one naming a ``chat_id`` is
  ``derived_from`` the run whose agent id it is.

``thinking`` and ``info`` lines are counted, not stored (the file keeps them);
``agent_updated`` tags the run ``handoff-<agent>``.

**Idempotent and resumable.** Every memory carries the tag ``ev-<agent_id>-<line>`` (its
identity: agent id and line number). Per file a **cursor**, an Event in the reserved
namespace :data:`CURSOR_NS` whose text is JSON, records the lines and bytes consumed, the
run's URI and the tool calls still open; it is written in the same batch as the memories
of those lines, so a batch is all or nothing and the next call resumes at the first line
not consumed. The cursor is keyed by ``<name>/<ts>``, so it survives the rename.

**Garbage.** A line that is not a JSON object with a known ``event`` and an integer ``ts``
(or whose ``agent_id`` is not the file's) is counted and reported with its line number,
never raised; so is a file shorter than what its cursor consumed (it was rewritten). The
last line of an active file without its newline is being written: it is left for the next
call.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

import cortexgraph as cg

if TYPE_CHECKING:
    from ...core.predicates import Predicate

__all__ = [
    "CURSOR_NS",
    "EVENT_TYPES",
    "IngestReport",
    "event_files",
    "follow",
    "ingest_events",
]

CURSOR_NS = "agent-events"
"""The namespace of the per-file cursors (reserved: ``ingest_events`` refuses it as ``ns``)."""

EVENT_TYPES = frozenset(
    {
        "request",
        "start",
        "tool_start",
        "tool_end",
        "thinking",
        "agent_updated",
        "finish",
        "error",
        "info",
    }
)
"""The event types of the file format."""

_FILE = re.compile(r"^(\d{1,19})(_active)?\.jsonl$")
_TAG_UNSAFE = re.compile(r"[^a-z0-9._:/-]+")
_MAX_TEXT = 256 * 1024  # characters of a prompt, result or tool output kept in memory
_LINES_PER_BATCH = 5_000  # bounds one write transaction on a long file


@attrs.frozen
class IngestReport:
    """What one call of :func:`ingest_events` (or :func:`follow`) did.

    Attributes:
        files: event files examined.
        lines: lines consumed (events and garbage).
        events: valid events among them.
        written: memories written or updated (URIs of the new versions).
        runs: the run memories touched, in file order.
        garbage: ``(file, line number, reason)`` for each line that was not an event.
    """

    files: int
    lines: int
    events: int
    written: tuple[cg.MemoryURI, ...]
    runs: tuple[cg.MemoryURI, ...]
    garbage: tuple[tuple[str, int, str], ...]

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        return {
            "files": self.files,
            "lines": self.lines,
            "events": self.events,
            "written": len(self.written),
            "runs": [str(uri) for uri in self.runs],
            "garbage": [{"file": f, "line": n, "reason": r} for f, n, r in self.garbage],
        }

    @classmethod
    def merge(cls, reports: list[IngestReport]) -> IngestReport:
        """One report for several calls (runs listed once, in order)."""
        return cls(
            files=sum(r.files for r in reports),
            lines=sum(r.lines for r in reports),
            events=sum(r.events for r in reports),
            written=tuple(u for r in reports for u in r.written),
            runs=tuple(dict.fromkeys(u for r in reports for u in r.runs)),
            garbage=tuple(g for r in reports for g in r.garbage),
        )


def _tag(prefix: str, value: object) -> str:
    """A tag ``prefix-value`` made safe (lowercase, no spaces) and at most 64 characters."""
    text = _TAG_UNSAFE.sub("-", str(value).lower()).strip("-") or "x"
    tag = f"{prefix}-{text}"
    if len(tag) > 64:  # keep it unique: a digest of the whole value replaces the tail
        digest = hashlib.sha256(str(value).encode("utf-8", "surrogatepass")).hexdigest()[:16]
        tag = f"{tag[:47]}-{digest}"
    return tag


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + " [...]"


def _jsonish(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _line_text(value: object, limit: int = 1024) -> str | None:
    """A short single-line field (``summary``, ``channel``) or None."""
    if value is None:
        return None
    text = " ".join(str(value).split())
    return text[:limit] or None


def event_files(directory: str | Path) -> list[Path]:
    """The event files under ``directory`` (``<name>/<ts>[_active].jsonl``), oldest run first.

    Runs are ordered by their timestamp, then name, so that a continuation is ingested
    after the run it continues.
    """
    found = []
    for path in Path(directory).glob("*/*.jsonl"):
        match = _FILE.match(path.name)
        if match and path.is_file():
            found.append((int(match.group(1)), path.parent.name, path.name, path))
    return [entry[3] for entry in sorted(found)]


def _file_key(path: Path) -> tuple[str, str, bool]:
    """``(key, agent_id, active)`` of an event file; the key is ``<name>/<ts>``."""
    match = _FILE.match(path.name)
    if match is None:
        raise cg.ValidationError(
            f"{path.name!r} is not an event file name (<ts>.jsonl or <ts>_active.jsonl)",
            field="path",
        )
    return f"{path.parent.name}/{match.group(1)}", match.group(1), bool(match.group(2))


@attrs.define
class _Cursor:
    """Where ingestion of one file stands; stored as JSON in the cursor memory."""

    uri: cg.MemoryURI | None
    key: str
    lines: int = 0
    bytes: int = 0
    run: str | None = None
    ns: str | None = None
    #: the tool calls still running: call_id -> [uri, start ts, None, line tag, tool]
    calls: dict[str, list[Any]] = attrs.Factory(dict)
    tags: list[str] = attrs.Factory(list)  # the run's current tags
    name: str = ""

    def to_text(self) -> str:
        return json.dumps(
            {
                "file": self.key,
                "lines": self.lines,
                "bytes": self.bytes,
                "run": self.run,
                "ns": self.ns,
                "calls": self.calls,
                "tags": self.tags,
                "name": self.name,
            },
            sort_keys=True,
            separators=(",", ":"),
        )


def _cursors_of(cx: cg.Cortex, keys: list[str]) -> dict[str, _Cursor]:
    """The stored cursors of the files ``keys`` (one query per 64 files, the most
    alternatives a query may have)."""
    found: dict[str, _Cursor] = {}
    for offset in range(0, len(keys), 64):
        part = keys[offset : offset + 64]
        where: Predicate = cg.Q.tag(_tag("file", part[0]))
        for key in part[1:]:
            where = where | cg.Q.tag(_tag("file", key))
        hits = cx.find(where & cg.Q.ns(CURSOR_NS), limit=2 * len(part)).hits
        for hit in hits:
            cursor = _cursor_from(hit.uri, hit.record.memory.text)
            found[cursor.key] = cursor
    return found


def _cursor_from(uri: cg.MemoryURI, text: str) -> _Cursor:
    try:
        data = json.loads(text)
        return _Cursor(
            uri,
            str(data["file"]),
            int(data["lines"]),
            int(data["bytes"]),
            data["run"],
            data["ns"],
            dict(data["calls"]),
            list(data["tags"]),
            str(data["name"]),
        )
    except (ValueError, LookupError, TypeError) as error:
        raise cg.CorruptionError(
            f"the event-file cursor {uri} is not what ingest_events writes: {error}",
            table="versions",
            operation="ingest-events",
        ) from None


def _parse(raw: bytes, agent_id: str) -> tuple[dict[str, Any] | None, str]:
    """The event of one line, or None and the reason it is garbage."""
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as error:
        return None, f"not JSON: {error}"
    if not isinstance(data, dict):
        return None, f"not a JSON object but {type(data).__name__}"
    kind = data.get("event")
    if kind not in EVENT_TYPES:
        return None, f"unknown event {kind!r}"
    ts = data.get("ts")
    if type(ts) is not int or not 0 <= ts < 1 << 63:
        return None, f"ts must be an integer of milliseconds, not {ts!r}"
    if "agent_id" in data and str(data["agent_id"]) != agent_id:
        return None, f"agent_id {data['agent_id']!r} is not the file's {agent_id!r}"
    return data, ""


class _FileIngest:
    """The writes of one slice of one file, inside its batch."""

    def __init__(
        self, cx: cg.Cortex, batch: cg.Batch, cursor: _Cursor, agent_id: str, ns: str
    ) -> None:
        self.cx = cx
        self.batch = batch
        self.cursor = cursor
        self.agent_id = agent_id
        self.default_ns = ns
        self.written: list[cg.MemoryURI] = []
        #: continuation tag -> the runs it may continue, newest first (looked up before
        #: the batch opened: reads see committed state only)
        self.targets: dict[str, list[cg.MemoryURI]] = {}
        #: call ids whose tool_end comes later in this slice, and those calls once started
        self.ends_later: set[str] = set()
        self.pending: dict[str, list[Any]] = {}
        self.retag_at: int | None = None
        #: runs written in this batch by continuation tag (``run-<id>``, ``session-<id>``)
        self.local: dict[str, cg.MemoryURI] = {}

    # -- the run ------------------------------------------------------------------------

    def _run_uri(self) -> cg.MemoryURI | None:
        return None if self.cursor.run is None else cg.MemoryURI.parse(self.cursor.run)

    def _ensure_run(self, event: dict[str, Any], line: int) -> cg.MemoryURI:
        uri = self._run_uri()
        if uri is not None:
            return uri
        name = str(event.get("name") or self.cursor.key.split("/", 1)[0])
        facet = event.get("facet")
        ns = self.default_ns
        if isinstance(facet, str) and facet:
            try:
                ns = _check_ns(facet)
            except cg.ValidationError:
                ns = self.default_ns
        tags = {"agent-run", "running", _tag("agent", name), _tag("run", self.agent_id)}
        tags.add(_tag("ev", f"{self.agent_id}-{line}"))
        if isinstance(facet, str) and facet:
            tags.add(_tag("facet", facet))
        prompt = event.get("prompt")
        text = _clip(_jsonish(prompt)) if prompt else f"{name} run {self.agent_id}"
        run = cg.Event(
            text=text,
            summary=_line_text(f"{name}: {text}", 200),
            tags=sorted(tags),
            kind="run",
            agent_id=self.agent_id,
            channel=_line_text(name),
            occurred_at=event["ts"],
            source=cg.Source(origin="system", session=_line_text(event.get("session_id"))),
        )
        uri = self.batch.write(run, ns=ns, at=event["ts"])
        self.written.append(uri)
        self.cursor.run = str(_head(uri))
        self.local[_tag("run", self.agent_id)] = _head(uri)
        self.cursor.ns = ns
        self.cursor.name = name
        self.cursor.tags = sorted(tags)
        return uri

    def _retag(self, ts: int, add: set[str], remove: frozenset[str] = frozenset()) -> None:
        """Change the run's tags; written once per slice, by :meth:`close`."""
        tags = (set(self.cursor.tags) - remove) | add
        if tags != set(self.cursor.tags):
            self.cursor.tags = sorted(tags)[:64]
            self.retag_at = ts

    def close(self) -> None:
        """Write what the slice changed in the run (its tags), as one new version."""
        uri = self._run_uri()
        if self.retag_at is not None and uri is not None:
            self.written.append(self.batch.update(uri, tags=self.cursor.tags, at=self.retag_at))
        self.retag_at = None

    def _continuations(self, event: dict[str, Any], run: cg.MemoryURI) -> None:
        """Tag the run with its session and chat, and link it to the runs it continues."""
        ts = event["ts"]
        add: set[str] = set()
        for field, prefix in (("session_id", "session"), ("chat_id", "chat")):
            value = event.get(field)
            if value is None or value == "":
                continue
            tag = _tag(prefix, value)
            if tag in self.cursor.tags:
                continue
            add.add(tag)
            wanted = tag if field == "session_id" else _tag("run", value)
            local = self.local.get(wanted)  # a run written earlier in this batch
            stored = [uri for uri in self.targets.get(tag, ()) if uri.id != run.id]
            target = local if local is not None and local.id != run.id else None
            target = target or (stored[0] if stored else None)
            if target is not None:
                self.batch.add_edge(run, target, "derived_from", at=ts)
            if field == "session_id":
                self.local[tag] = run
        if add:
            self._retag(ts, add)

    # -- events -------------------------------------------------------------------------

    def apply(self, event: dict[str, Any], line: int) -> None:
        kind = event["event"]
        ts = event["ts"]
        if kind in ("thinking", "info"):
            return
        run = self._ensure_run(event, line)
        ns = self.cursor.ns or self.default_ns
        key = _tag("ev", f"{self.agent_id}-{line}")
        name = self.cursor.name
        if kind in ("request", "start"):
            add = set()
            for field, prefix in (("provider", "provider"), ("model", "model")):
                if event.get(field):
                    add.add(_tag(prefix, event[field]))
            if add:
                self._retag(ts, add)
            self._continuations(event, run)
        elif kind == "agent_updated" and event.get("agent"):
            self._retag(ts, {_tag("handoff", event["agent"])})
        elif kind == "tool_start":
            self._tool_start(event, key, ns, run)
        elif kind == "tool_end":
            self._tool_end(event, key, ns, run)
        elif kind == "finish":
            self._finish(event, key, ns, run, name)
        elif kind == "error":
            text = _clip(_jsonish(event.get("error") or "error"))
            trace = event.get("trace")
            error = cg.Event(
                text=text if not trace else _clip(f"{text}\n\n{_jsonish(trace)}"),
                summary=_line_text(text, 200),
                tags=sorted({"agent-error", "error", _tag("agent", name), key}),
                kind="error",
                agent_id=self.agent_id,
                channel=_line_text(name),
                occurred_at=ts,
            )
            uri = self.batch.write(error, ns=ns, at=ts)
            self.written.append(uri)
            self.batch.add_edge(uri, run, "relates_to", at=ts)
            self._retag(ts, {"failed", "error"}, frozenset({"running"}))

    def _tool_memory(
        self,
        tool: str,
        call_id: str,
        text: str,
        key: str,
        start: int | None,
        end: int | None,
        result: str,
    ) -> cg.Event:
        """A tool call as stored: running (no ``end``) or done, with its duration when both
        ends are known (``valid_from``/``valid_to``)."""
        if end is None:
            body, summary, state = text, f"{tool}: running", "running"
        else:
            body, state = (f"{text}\n-> {result}" if result else text), "done"
            summary = f"{tool}: done" if start is None else f"{tool}: {end - start} ms"
        return cg.Event(
            text=_clip(body),
            summary=_line_text(summary, 200),
            tags=sorted({"tool-call", state, _tag("tool", tool), key}),
            kind="tool_call",
            call_id=_line_text(call_id),
            agent_id=self.agent_id,
            channel=_line_text(tool),
            occurred_at=start if start is not None else end,
            valid_from=start,
            valid_to=end if start is not None else None,
        )

    def _tool_start(self, event: dict[str, Any], key: str, ns: str, run: cg.MemoryURI) -> None:
        ts = event["ts"]
        tool = str(event.get("tool") or "tool")
        call_id = str(event.get("call_id") or f"line-{key}")
        args = event.get("args")
        text = f"{tool} {_jsonish(args)}" if args is not None else tool
        if call_id in self.ends_later:  # its end is in this slice: write the call once, whole
            self.pending[call_id] = [None, ts, text, key, tool]
            return
        memory = self._tool_memory(tool, call_id, text, key, ts, None, "")
        uri = self.batch.write(memory, ns=ns, at=ts)
        self.written.append(uri)
        self.batch.add_edge(uri, run, "relates_to", at=ts)
        # the text stays in the memory (clipping it again at the end gives the same prefix)
        self.cursor.calls[call_id] = [str(_head(uri)), ts, None, key, tool]

    def _tool_end(self, event: dict[str, Any], key: str, ns: str, run: cg.MemoryURI) -> None:
        ts = event["ts"]
        call_id = str(event.get("call_id") or "")
        result = _jsonish(event.get("result")) if "result" in event else ""
        opened = self.pending.pop(call_id, None) or self.cursor.calls.pop(call_id, None)
        if opened is None:  # an end without its start: the call, its duration unknown
            tool = str(event.get("tool") or "tool")
            args = event.get("args")
            text = f"{tool} {_jsonish(args)}" if args is not None else tool
            opened = [None, None, text, key, tool]
        start_uri, start, text, start_key, tool = opened
        if text is None:
            text = self.batch.resolve(cg.MemoryURI.parse(start_uri)).memory.text
        end = ts if start is None else max(ts, int(start))
        memory = self._tool_memory(tool, call_id, text, start_key, start, end, result)
        if start_uri is None:
            uri = self.batch.write(memory, ns=ns, at=ts)
            self.batch.add_edge(uri, run, "relates_to", at=ts)
        else:
            fields = ("text", "summary", "tags", "valid_to")
            changes = {name: getattr(memory, name) for name in fields}
            uri = self.batch.update(cg.MemoryURI.parse(start_uri), at=ts, **changes)
        self.written.append(uri)

    def _finish(
        self, event: dict[str, Any], key: str, ns: str, run: cg.MemoryURI, name: str
    ) -> None:
        ts = event["ts"]
        add = {"finished"}
        if event.get("skipped"):
            add.add(_tag("skipped", event["skipped"]))
        result = event.get("result")
        if result is not None and _jsonish(result).strip():
            fact = cg.Fact(
                text=_clip(_jsonish(result)),
                tags=sorted({"agent-result", _tag("agent", name), _tag("run", self.agent_id), key}),
                source=cg.Source(origin="llm", session=_line_text(event.get("session_id"))),
            )
            uri = self.batch.write(fact, ns=ns, at=ts)
            self.written.append(uri)
            self.batch.add_edge(uri, run, "derived_from", at=ts)
        self._retag(ts, add, frozenset({"running"}))
        self._continuations(event, run)


def _head(uri: cg.MemoryURI) -> cg.MemoryURI:
    return cg.MemoryURI(uri.actor, uri.ns, uri.id, None)


def _check_ns(name: str) -> str:
    from ...core.uri import check_name

    return check_name(name, "facet")


class _Shrunk(Exception):
    """An event file is shorter than what its cursor consumed (rewritten or truncated)."""


_Slice = tuple[_Cursor, str, list[tuple[bytes, int]]]  # cursor, agent id, (line, bytes)


def _new_lines(path: Path, cursor: _Cursor, active: bool) -> list[tuple[bytes, int]]:
    """The lines of ``path`` after the cursor, each with the bytes it takes in the file.

    Raises:
        OSError: the file cannot be read (FileNotFoundError: it was renamed meanwhile).
    """
    size = path.stat().st_size
    if size < cursor.bytes:
        raise _Shrunk(f"the file has {size} bytes, fewer than the {cursor.bytes} already ingested")
    if size == cursor.bytes:
        return []
    with path.open("rb") as handle:
        handle.seek(cursor.bytes)
        data = handle.read()
    lines = [(raw, len(raw) + 1) for raw in data.split(b"\n")]
    tail = lines.pop()[0]  # the bytes after the last newline (b"" when it ends with one)
    if tail and not active:
        lines.append((tail, len(tail)))  # a finished file's last line needs no newline
    return lines


def _continuation_targets(
    cx: cg.Cortex, events: list[tuple[int, dict[str, Any] | None, str]]
) -> dict[str, list[cg.MemoryURI]]:
    """For each session or chat the events name, the runs already stored that they continue.

    A session continues the latest run tagged with it; a chat id is the agent id of the
    run that began the chat.
    """
    targets: dict[str, list[cg.MemoryURI]] = {}
    for _, event, _ in events:
        if event is None or event["event"] not in ("request", "start", "finish"):
            continue
        for field, prefix in (("session_id", "session"), ("chat_id", "chat")):
            value = event.get(field)
            tag = _tag(prefix, value)
            if value is None or value == "" or tag in targets:
                continue
            wanted = tag if field == "session_id" else _tag("run", value)
            hits = cx.find(
                cg.Q.type(cg.Event) & cg.Q.tag(wanted) & cg.Q.tag("agent-run"),
                limit=20,
                order_by="recent",
            ).hits
            targets[tag] = [hit.uri for hit in hits]
    return targets


def _ends_later(events: list[tuple[int, dict[str, Any] | None, str]]) -> set[str]:
    """The call ids whose tool_start and a later tool_end are both among ``events``."""
    started: set[str] = set()
    ended: set[str] = set()
    for _, event, _ in events:
        if event is not None and event["event"] in ("tool_start", "tool_end"):
            call_id = str(event.get("call_id") or "")
            if event["event"] == "tool_start":
                started.add(call_id)
            elif call_id in started:
                ended.add(call_id)
    return ended


def _ingest_group(cx: cg.Cortex, group: list[_Slice], ns: str) -> IngestReport:
    """Ingest slices of one or more files in one batch, with their cursors."""
    garbage: list[tuple[str, int, str]] = []
    parsed: list[list[tuple[int, dict[str, Any] | None, str]]] = []
    for cursor, agent_id, chunk in group:
        numbered = enumerate(chunk, start=cursor.lines + 1)
        parsed.append([(n, *_parse(raw, agent_id)) for n, (raw, _) in numbered if raw.strip()])
    targets = _continuation_targets(cx, [event for part in parsed for event in part])
    events = 0
    written: list[cg.MemoryURI] = []
    runs: list[cg.MemoryURI] = []
    local: dict[str, cg.MemoryURI] = {}
    with cx.batch() as batch:
        for (cursor, agent_id, chunk), lines in zip(group, parsed, strict=True):
            step = _FileIngest(cx, batch, cursor, agent_id, ns)
            step.targets, step.local, step.ends_later = targets, local, _ends_later(lines)
            at = None
            for number, event, reason in lines:
                if event is None:
                    garbage.append((cursor.key, number, reason))
                    continue
                at = event["ts"]
                try:
                    step.apply(event, number)
                except cg.ValidationError as error:  # a field the memory model refuses
                    garbage.append((cursor.key, number, str(error)))
                    continue
                events += 1
            step.close()
            written.extend(step.written)
            cursor.lines += len(chunk)
            cursor.bytes += sum(size for _, size in chunk)
            # a slice of garbage only is dated by the file's own time, never the clock
            _save_cursor(batch, cursor, int(agent_id) if at is None else at)
            if cursor.run is not None:
                runs.append(cg.MemoryURI.parse(cursor.run))
    lines_consumed = sum(len(chunk) for _, _, chunk in group)
    unique = tuple(dict.fromkeys(runs))
    return IngestReport(0, lines_consumed, events, tuple(written), unique, tuple(garbage))


def _save_cursor(batch: cg.Batch, cursor: _Cursor, at: int | None) -> None:
    text = cursor.to_text()
    if cursor.uri is None:
        cursor.uri = batch.write(
            cg.Event(
                text=text,
                tags=("agent-events-cursor", _tag("file", cursor.key)),
                kind="cursor",
                channel="agent-events",
                confidence=0.0,
                priority=1,
            ),
            ns=CURSOR_NS,
            at=at,
        )
    else:
        cursor.uri = batch.update(cursor.uri, text=text, at=at)


def ingest_events(cx: cg.Cortex, path: str | Path, *, ns: str = "default") -> IngestReport:
    """Ingest agent event files into ``cx``: the lines not yet ingested, once each.

    Args:
        cx: a writable handle.
        path: a directory of ``<name>/<ts>[_active].jsonl`` files, or one such file.
        ns: the namespace of runs whose request names no (valid) ``facet``.

    Returns:
        An :class:`IngestReport` (garbage lines are in it, never raised).

    Raises:
        ValidationError: a bad ``ns`` or ``path`` (``field`` names it).
        ReadOnlyError: the handle is read-only.
        CorruptionError: a cursor memory is not what this module writes.
    """
    if cx.readonly:
        raise cg.ReadOnlyError("ingest_events writes memories; open the store read-write")
    _check_ns(ns)
    if ns == CURSOR_NS:
        raise cg.ValidationError(f"{CURSOR_NS!r} is reserved for event-file cursors", field="ns")
    target = Path(path)
    if target.is_dir():
        files = event_files(target)
    elif target.is_file():
        _file_key(target)
        files = [target]
    else:
        raise cg.ValidationError(f"{str(target)!r} is neither a directory nor a file", field="path")
    keyed = [(file, *_file_key(file)) for file in files]
    cursors = _cursors_of(cx, [key for _, key, _, _ in keyed])
    reports: list[IngestReport] = []
    unreadable: list[tuple[str, int, str]] = []
    group: list[_Slice] = []
    size = 0
    for file, key, agent_id, active in keyed:
        cursor = cursors.get(key) or _Cursor(None, key)
        try:
            lines = _new_lines(file, cursor, active)
        except FileNotFoundError:  # renamed since it was listed: the next pass reads it
            continue
        except OSError as error:
            unreadable.append((key, cursor.lines + 1, f"unreadable: {error}"))
            continue
        except _Shrunk as error:  # reported every call; the lines ingested stay
            unreadable.append((key, cursor.lines + 1, str(error)))
            continue
        for offset in range(0, len(lines), _LINES_PER_BATCH):
            chunk = lines[offset : offset + _LINES_PER_BATCH]
            if group and size + len(chunk) > _LINES_PER_BATCH:
                reports.append(_ingest_group(cx, group, ns))
                group, size = [], 0
            group.append((cursor, agent_id, chunk))
            size += len(chunk)
    if group:
        reports.append(_ingest_group(cx, group, ns))
    merged = IngestReport.merge(reports)
    return attrs.evolve(merged, files=len(files), garbage=merged.garbage + tuple(unreadable))


def _active(directory: Path) -> list[Path]:
    return [p for p in event_files(directory) if p.name.endswith("_active.jsonl")]


def follow(
    cx: cg.Cortex,
    directory: str | Path,
    *,
    ns: str = "default",
    interval: float = 0.1,
    timeout: float | None = None,
    stop: threading.Event | None = None,
    on_report: Callable[[IngestReport], None] | None = None,
) -> IngestReport:
    """Ingest ``directory`` and keep tailing its active files until they are all renamed.

    Each pass ingests what is new (appended lines, new files, renamed ones); it returns
    once a pass finds no ``_active.jsonl`` file left, after ingesting the renamed files
    whole. Between passes it waits ``interval`` seconds.

    Args:
        cx: a writable handle.
        directory: the event directory.
        ns: as for :func:`ingest_events`.
        interval: seconds between passes.
        timeout: give up after this many seconds (the report so far is returned).
        stop: return at the next pass once this is set.
        on_report: called with each pass's report that consumed lines.

    Returns:
        All passes' reports merged.
    """
    if not isinstance(interval, (int, float)) or not 0 < interval <= 60:
        raise cg.ValidationError("must be a number of seconds in (0, 60]", field="interval")
    root = Path(directory)
    if not root.is_dir():
        raise cg.ValidationError(f"{str(root)!r} is not a directory", field="directory")
    deadline = None if timeout is None else time.monotonic() + timeout
    reports = []
    for report in _passes(cx, root, ns, interval, deadline, stop):
        if report.lines and on_report is not None:
            on_report(report)
        reports.append(report)
    return IngestReport.merge(reports)


def _passes(
    cx: cg.Cortex,
    root: Path,
    ns: str,
    interval: float,
    deadline: float | None,
    stop: threading.Event | None,
) -> Iterator[IngestReport]:
    while True:
        still_active = bool(_active(root))
        yield ingest_events(cx, root, ns=ns)
        if not still_active and not _active(root):
            return
        if (stop is not None and stop.is_set()) or (
            deadline is not None and time.monotonic() >= deadline
        ):
            return
        time.sleep(interval)
