"""What every importer shares: the plan a reader builds from a source file, and the one
batch that applies it.

A reader (one module per format) parses the whole file first and returns a :class:`Plan`:
the memories to write (:class:`Item`), the edges to add (:class:`Link`) and the records it
skipped, each with a reason. Any bad record stops the reader with a
:class:`~cortexgraph.errors.ValidationError` naming its line or row, before the store is
touched. :func:`apply_plan` then writes the plan in one batch, so an import is all or
nothing.

Idempotence: every imported memory carries two tags, ``from:<format>`` and a *source tag*
(:func:`source_tag`) derived from the record's id in the source. Before the batch opens,
each item's source tag is looked up in the store (whatever the memory's status, tombstoned
included); a memory already there is not written again, and an edge already there is
not added again. (If another writer commits between the look-ups and the batch, the
batch is abandoned and the look-ups run again.) Running an import twice therefore
imports nothing the second time, and a memory the user tombstoned after importing it
does not come back.

Order inside the batch: the writes (in file order), the edges, the accesses (an access
of an archived memory would restore it), then the lifecycle statuses.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from ..batch import Batch, set_status
from ..core.graph import normalise_relation
from ..core.predicates import Q
from ..core.taxonomy import Memory
from ..core.uri import MemoryURI
from ..cortex import Cortex
from ..errors import CortexError, ValidationError

__all__ = [
    "Item",
    "Link",
    "MigrationReport",
    "Plan",
    "apply_plan",
    "as_tag",
    "make_memory",
    "parse_json",
    "parse_time",
    "read_source",
    "require",
    "source_tag",
]

Progress = Callable[[int, int], None]

#: How a source status is reached from "active" by lifecycle moves.
_STATUS_MOVES = {
    "active": (),
    "archived": ("archived",),
    "pruned": ("archived", "pruned"),
    "merged": ("merged",),
}
_SAFE_KEY = re.compile(r"[a-z0-9][a-z0-9._-]*")
_UNTAGGABLE = re.compile(r"[\s\x00-\x1f\x7f]+")
_MAX_TAG = 64
_ATTEMPTS = 3


@attrs.frozen
class MigrationReport:
    """What an import did.

    Attributes:
        imported: how many of each kind were written, e.g. ``{"memories": 50, "edges": 20}``.
        skipped: ``(locator, reason)`` for each record not imported, e.g.
            ``("line 7", "already imported as cx://...")``; a locator is ``"line N"``
            (1-based) in a JSON Lines file, ``"results[N]"`` (0-based) in a JSON document
            and ``"<table> row N"`` (the rowid) in a SQLite database.
        format: the source format's name (one of ``FORMATS``).
    """

    imported: dict[str, int]
    skipped: list[tuple[str, str]]
    format: str = ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready rendering: ``{"format", "imported", "skipped": [{"at", "reason"}]}``."""
        return {
            "format": self.format,
            "imported": dict(self.imported),
            "skipped": [{"at": where, "reason": why} for where, why in self.skipped],
        }


@attrs.frozen
class Item:
    """One memory to import.

    Attributes:
        key: the record's id in the source (unique in the file).
        locator: where the record is (``"line 3"``, ``"memories row 12"``).
        memory: the memory to write; its tags include the ``from:`` and source tags.
        ns: the namespace to write it in.
        at: when it was written in the source (ms), or ``None`` for the import's ``at``.
        status: its lifecycle status: ``active``, ``archived``, ``pruned`` or ``merged``.
        access_count: how many reads to journal for it.
        last_access: when it was last read (ms), or ``None`` for ``at``.
    """

    key: str
    locator: str
    memory: Memory
    ns: str
    at: int | None = None
    status: str = "active"
    access_count: int = 0
    last_access: int | None = None


@attrs.frozen
class Link:
    """One edge to import, between two items named by their source keys."""

    src: str
    dst: str
    relation: str
    locator: str
    strength: float = 1.0
    status: str = "active"
    origin: str = "system"
    at: int | None = None


@attrs.frozen
class Plan:
    """Everything a reader found in a source file, checked, before the store is touched."""

    format: str
    items: list[Item]
    links: list[Link]
    skipped: list[tuple[str, str]] = attrs.field(factory=list)


def source_tag(fmt: str, key: str) -> str:
    """The tag that records a memory's id in its source, ``<format>:<key>``.

    A key that is not already a short lowercase tag (entity names with spaces or capitals,
    long ids) is replaced by ``sha256-`` and the first 24 hex digits of its SHA-256, so
    that distinct keys keep distinct tags.

    >>> source_tag("mem0", "3f2a-11")
    'mem0:3f2a-11'
    >>> source_tag("mcp-memory", "Alice Smith")
    'mcp-memory:sha256-...'
    """
    if _SAFE_KEY.fullmatch(key) and not key.startswith("sha256-"):
        tag = f"{fmt}:{key}"
        if len(tag) <= _MAX_TAG:
            return tag
    return f"{fmt}:sha256-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:24]}"


def as_tag(text: str, *, prefix: str = "") -> str | None:
    """``prefix + text`` made into a tag: lowercase, runs of whitespace and control
    characters as one ``-``, cut to 64 characters; ``None`` if nothing is left.

    >>> as_tag("Software Engineer", prefix="entity:")
    'entity:software-engineer'
    """
    body = _UNTAGGABLE.sub("-", text.lower()).strip("-")
    if not body:
        return None
    return (prefix + body)[:_MAX_TAG]


def require(
    record: dict[str, Any], name: str, kind: type, where: str, *, optional: bool = False
) -> Any:
    """``record[name]``, checked to be a ``kind`` (``None`` allowed when ``optional``).

    Raises:
        ValidationError: naming ``name``, with ``where`` (the record's locator).
    """
    value = record.get(name)
    if value is None and optional:
        return None
    if type(value) is not kind or (kind is int and isinstance(value, bool)):
        wanted = {str: "a string", list: "a list", dict: "an object", int: "an integer"}
        got = "missing" if name not in record else f"{type(value).__name__}"
        raise ValidationError(
            f"{where}: {name!r} must be {wanted.get(kind, kind.__name__)}, not {got}",
            field=name,
        )
    return value


def make_memory(cls: type[Memory], where: str, **fields: Any) -> Memory:
    """``cls(**fields)``, with a validation error's message prefixed by ``where``.

    Raises:
        ValidationError: naming the memory's field and the record's locator.
    """
    with _located(where):
        return cls(**fields)
    raise AssertionError("unreachable")  # pragma: no cover - keeps mypy's flow analysis happy


def read_source(path: Path) -> bytes:
    """The bytes of the file an import reads.

    Raises:
        ValidationError: field ``path``: it does not exist, is not a file, or cannot be read.
    """
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ValidationError(f"no such file: {path}", field="path") from None
    except OSError as error:
        raise ValidationError(f"cannot read {path}: {error.strerror}", field="path") from None


def parse_json(data: bytes, *, first_line: int, field: str, hint: str) -> Any:
    """The JSON value ``data`` (UTF-8) holds; ``first_line`` is the file line it starts at.

    Raises:
        ValidationError: naming ``field`` and the line of the invalid UTF-8 or the JSON
            error; ``hint`` says what the file should have been.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = first_line + data.count(b"\n", 0, error.start)
        raise ValidationError(
            f"line {line}: invalid UTF-8 at byte {error.start}", field=field
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValidationError(
            f"line {first_line + error.lineno - 1}: not JSON ({error.msg} at column"
            f" {error.colno}); {hint}",
            field=field,
        ) from None


def parse_time(value: object, *, where: str, field: str) -> int:
    """Milliseconds since the epoch from a source timestamp.

    Accepts an ISO 8601 string (a time without an offset is read as UTC) or an integer
    (milliseconds when it is at least 10**11, seconds otherwise, as JavaScript and Unix
    tools write them).

    Raises:
        ValidationError: naming ``field``, with ``where`` (the record's locator).
    """
    if type(value) is int:
        ms = value if abs(value) >= 10**11 else value * 1000
    elif type(value) is str:
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValidationError(
                f"{where}: {value!r} is not an ISO 8601 timestamp", field=field
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        ms = int(moment.timestamp() * 1000)
    else:
        raise ValidationError(
            f"{where}: a timestamp must be a string or an integer, not {type(value).__name__}",
            field=field,
        )
    if not 0 <= ms <= (1 << 63) - 1:
        raise ValidationError(f"{where}: timestamp {value!r} is before 1970", field=field)
    return ms


def check_plan(plan: Plan) -> None:
    """Keys are unique, every link names known keys, statuses are known.

    Raises:
        ValidationError: naming the record's locator.
    """
    seen: dict[str, str] = {}
    for item in plan.items:
        if item.key in seen:
            raise ValidationError(
                f"{item.locator}: duplicate id {item.key!r} (first at {seen[item.key]})",
                field="id",
            )
        if item.status not in _STATUS_MOVES:
            raise ValidationError(f"{item.locator}: unknown status {item.status!r}", field="status")
        seen[item.key] = item.locator
    for link in plan.links:
        for end, key in (("from", link.src), ("to", link.dst)):
            if key not in seen:
                raise ValidationError(
                    f"{link.locator}: unknown {end!r} end {key!r}: the file has no record"
                    " with that name or id",
                    field=end,
                )


def _find_imported(cx: Cortex, tag: str) -> tuple[MemoryURI, str] | None:
    """The memory already carrying ``tag`` (any status), with its status."""
    every_status = Q.status("tombstoned") | ~Q.status("tombstoned")
    found = cx.find(Q.tag(tag) & every_status, limit=1)
    if not found.hits:
        return None
    hit = found.hits[0]
    return MemoryURI.trusted(hit.uri.actor, hit.uri.ns, hit.uri.id, None), hit.record.status


def apply_plan(
    cx: Cortex, plan: Plan, *, at: int | None = None, progress: Progress | None = None
) -> MigrationReport:
    """Write ``plan`` into ``cx`` in one batch; skip what an earlier import wrote.

    Args:
        cx: the store, open for writing.
        plan: what a reader found.
        at: the time for records without a timestamp of their own (default: the
            store's clock, read once).
        progress: called with ``(done, total)`` as records are applied.

    Returns:
        The counts of memories and edges written and the records skipped, with reasons.

    Raises:
        ValidationError: a bad record (naming its locator); the store is unchanged.
        CortexError: other writers kept changing the store between the look-ups of
            earlier imports and the batch (three times); nothing was imported.
    """
    check_plan(plan)
    now = cx.clock.now_ms() if at is None else at  # one reading for the whole file
    for _ in range(_ATTEMPTS):
        try:
            return _apply_once(cx, plan, now, progress)
        except _StoreMoved:
            continue
    raise CortexError(
        f"another writer changed the store during each of {_ATTEMPTS} attempts to import;"
        " nothing was imported, try again"
    )


class _StoreMoved(Exception):
    """Another writer committed between the look-ups and the batch."""


def _apply_once(cx: Cortex, plan: Plan, now: int, progress: Progress | None) -> MigrationReport:
    """One attempt of :func:`apply_plan`: look up what earlier imports wrote, then write
    the rest in one batch, unless the store changed in between (``_StoreMoved``)."""
    seen_seq = cx.seq  # find reads committed state, so the look-ups run before the batch
    skipped = list(plan.skipped)
    uris: dict[str, MemoryURI] = {}
    old: dict[str, str] = {}  # key -> status of a memory an earlier import wrote
    fresh: list[Item] = []
    for item in plan.items:
        tag = source_tag(plan.format, item.key)
        existing = _find_imported(cx, tag)
        if existing is None:
            fresh.append(item)
        else:
            uris[item.key], old[item.key] = existing
            skipped.append((item.locator, f"already imported as {existing[0]}"))
    links: list[Link] = []
    placed: dict[tuple[str, str, str], str] = {}
    for link in plan.links:
        rel = normalise_relation(link.relation)
        edge = (link.src, rel, link.dst)
        if edge in placed:
            skipped.append((link.locator, f"the same {rel} edge as {placed[edge]}"))
            continue
        placed[edge] = link.locator
        if link.src in old and link.dst in old:
            if "tombstoned" in (old[link.src], old[link.dst]):
                skipped.append((link.locator, "an end was tombstoned after an earlier import"))
                continue
            if any(
                e.relation == rel and e.dst.id == uris[link.dst].id
                for e in cx.edges(uris[link.src])
            ):
                skipped.append((link.locator, f"{rel} edge already imported"))
                continue
        elif "tombstoned" in (old.get(link.src), old.get(link.dst)):
            skipped.append((link.locator, "an end was tombstoned after an earlier import"))
            continue
        links.append(link)
    total, done = len(fresh) + len(links), 0
    with cx.batch() as b:
        if b.txn.last_seq() != seen_seq:
            raise _StoreMoved
        for item in fresh:
            with _located(item.locator):
                written = b.write(item.memory, ns=item.ns, at=now if item.at is None else item.at)
            uris[item.key] = MemoryURI.trusted(written.actor, written.ns, written.id, None)
            done += 1
            if progress is not None:
                progress(done, total)
        for link in links:
            with _located(link.locator):
                b.add_edge(
                    uris[link.src],
                    uris[link.dst],
                    link.relation,
                    strength=link.strength,
                    status=link.status,
                    origin=link.origin,
                    at=now if link.at is None else link.at,
                )
            done += 1
            if progress is not None:
                progress(done, total)
        _replay_accesses(b, fresh, uris, now)
        for item in fresh:
            for status in _STATUS_MOVES[item.status]:
                set_status(b, uris[item.key].id, status, at=now if item.at is None else item.at)
    return MigrationReport(
        imported={"memories": len(fresh), "edges": len(links)},
        skipped=skipped,
        format=plan.format,
    )


@contextlib.contextmanager
def _located(where: str) -> Iterator[None]:
    """Prefix a validation error raised by a verb with the record's locator."""
    try:
        yield
    except ValidationError as error:
        message = str(error).removeprefix(f"{error.field}: ")
        raise ValidationError(f"{where}: {message}", field=error.field) from None


def _replay_accesses(b: Batch, items: list[Item], uris: dict[str, MemoryURI], now: int) -> None:
    """Journal each item's reads: ``access_count`` accesses, the last at ``last_access``.

    Items read last at the same instant share their access entries: the k-th entry of a
    group names every item of it read more than k times, so the journal grows with the
    largest count of each group, not with the sum of the counts.
    """
    groups: dict[int, list[Item]] = {}
    for item in items:
        if item.access_count > 0:
            when = item.last_access if item.last_access is not None else item.at
            groups.setdefault(now if when is None else when, []).append(item)
    for when in sorted(groups):
        group = groups[when]
        for k in range(max(item.access_count for item in group)):
            b.record_access([uris[i.key] for i in group if i.access_count > k], at=when)
