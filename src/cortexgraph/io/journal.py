"""Export and import of the journal as JSON Lines, and a Markdown view of it.

File layout (UTF-8, one JSON object per line, each line ending in ``\\n``)::

    line 1   {"format": "cortexgraph-journal", "version": 1, "actor": ..., "hash_name": ...,
              "since": S, "last_seq": N, "overall_root": <64 hex digits>}
    line 2   {"seq": S+1, "actor": ..., "op": ..., "entry": {...}, "cbor": <base64>}
    ...
    line N-S+1  the entry with seq N

``cbor`` is the entry's canonical CBOR, byte for byte as the journal holds it, and is
what an import applies; ``entry`` is a readable rendering of the same entry (bytes as hex)
that an import checks against ``cbor``. The header's ``overall_root`` is the store's
OverallRoot at seq ``last_seq``, taken in the same read as ``last_seq``; ``since`` is the
seq the export starts after (0: the whole journal).

Import (:func:`import_journal`) is all-or-nothing and idempotent:

- the whole file is read and checked first, without touching the store; then its entries
  go to :meth:`Cortex.append_entries <cortexgraph.Cortex.append_entries>`, which applies
  them in one write transaction exactly as a replay does (the same ``EntryWriter`` that
  writes and rebuilds use) and commits once. Any error aborts it: the store is unchanged.
- an entry whose seq the store already holds must be byte-identical to the stored one and
  is skipped, so importing a file twice changes nothing the second time, and an
  incremental export (``since > 0``) applies on top of a store holding entries up to
  ``since``.
- when the store ends at ``last_seq`` after the import (it did not hold more), its
  OverallRoot must equal the header's.

A line longer than :data:`MAX_LINE_BYTES` is refused after reading at most that many bytes.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import io
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, BinaryIO, TextIO

import attrs

from ..core.journal import Entry, decode_entry
from ..cortex import Cortex
from ..errors import CorruptionError, JournalFileError, ValidationError, VerificationError
from ..replay import ReplayError

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_LINE_BYTES",
    "ImportReport",
    "JournalFile",
    "JournalHeader",
    "export_journal",
    "export_markdown",
    "import_journal",
    "read_journal",
    "readable",
    "render_entry",
]

FORMAT = "cortexgraph-journal"
FORMAT_VERSION = 1
#: The longest line an import reads (an entry's body is at most a few MiB of text; base64
#: and the rendering together stay far below this).
MAX_LINE_BYTES = 16 << 20

#: Called with (done, total).
Progress = Callable[[int, int], None]

_PROGRESS_EVERY = 2048
_HEX_ROOT = re.compile(r"[0-9a-f]{64}")
_LINE_FIELDS = ("seq", "actor", "op", "entry", "cbor")


@attrs.frozen
class JournalHeader:
    """The first line of an export: whose journal, which entries, and the root they end at."""

    actor: str
    hash_name: str
    since: int
    last_seq: int
    overall_root: bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "actor": self.actor,
            "hash_name": self.hash_name,
            "since": self.since,
            "last_seq": self.last_seq,
            "overall_root": self.overall_root.hex(),
        }


@attrs.frozen
class ImportReport:
    """What :func:`import_journal` did.

    Attributes:
        header: the file's header.
        applied: entries appended to the store.
        skipped: entries the store already held (byte-identical).
        seq: the store's last seq after the import.
        overall_root: the store's OverallRoot after the import.
        root_checked: whether the store ended at the header's ``last_seq``, so its root
            was checked against the header's (and matched).
    """

    header: JournalHeader
    applied: int
    skipped: int
    seq: int
    overall_root: bytes
    root_checked: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "actor": self.header.actor,
            "applied": self.applied,
            "skipped": self.skipped,
            "seq": self.seq,
            "overall_root": self.overall_root.hex(),
            "root_checked": self.root_checked,
        }


# ---------------------------------------------------------------------------
# rendering


def readable(value: Any) -> Any:
    """``value`` with every ``bytes`` in it as hex, lists and dicts walked."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [readable(v) for v in value]
    return value


def render_entry(entry: Entry) -> dict[str, Any]:
    """A journal entry as a JSON-ready dict: ``seq``, ``at``, ``op``, ``ns`` and the op's
    fields, with bytes (ids) as hex. For people and scripts; the bytes are the CBOR."""
    return {
        "seq": entry.seq,
        "at": entry.at,
        "op": entry.op,
        "ns": entry.ns,
        **readable(dict(entry.fields)),
    }


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _canonical_json(value: Any) -> str:
    """One spelling per JSON value, to compare a rendering read back with a fresh one."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)


# ---------------------------------------------------------------------------
# export


def _header(cx: Cortex, since: int) -> JournalHeader:
    if type(since) is not int or since < 0:
        raise ValidationError(f"must be a non-negative integer, not {since!r}", field="since")
    manifest = cx.roots()  # seq and root from one read
    return JournalHeader(
        actor=cx.actor,
        hash_name=cx.hash_name,
        since=min(since, manifest.seq),
        last_seq=manifest.seq,
        overall_root=manifest.overall_root,
    )


def _entries(
    cx: Cortex, header: JournalHeader, progress: Progress | None
) -> Iterator[tuple[Entry, bytes]]:
    """The decoded entries after ``header.since`` up to ``header.last_seq`` (entries
    appended during the export belong to a later one)."""
    total = header.last_seq - header.since
    done = 0
    for seq, data in cx.journal_bytes(header.since):
        if seq > header.last_seq:
            break
        entry = decode_entry(data)
        if entry.seq != seq:
            raise CorruptionError(
                f"journal key {seq} holds entry {entry.seq}", table="journal", operation="read"
            )
        yield entry, data
        done += 1
        if progress is not None and done % _PROGRESS_EVERY == 0:
            progress(done, total)
    if progress is not None:
        progress(done, total)


def export_journal(
    cx: Cortex, out: TextIO, *, since: int = 0, progress: Progress | None = None
) -> int:
    """Write the journal after ``since`` to ``out`` as JSON Lines (see the module doc).

    Entries are read in short read transactions; the export ends at the seq the header
    names, even when entries are appended meanwhile.

    Args:
        out: a text stream; each line is written with a trailing ``\\n``.
        since: export the entries after this seq (0: all; past the end: none).
        progress: called as ``progress(done, total)`` with entries written so far.

    Returns:
        How many entries were written.

    Raises:
        ValidationError: ``since`` is not a non-negative integer.
        CorruptionError: a stored entry does not decode (J6) or the journal is not dense.
    """
    header = _header(cx, since)
    out.write(_dumps(header.to_json()) + "\n")
    count = 0
    for entry, data in _entries(cx, header, progress):
        line = {
            "seq": entry.seq,
            "actor": cx.actor,
            "op": entry.op,
            "entry": render_entry(entry),
            "cbor": base64.b64encode(data).decode("ascii"),
        }
        out.write(_dumps(line) + "\n")
        count += 1
    return count


def _when(at: int) -> str:
    try:
        moment = datetime.datetime.fromtimestamp(at / 1000, tz=datetime.UTC)
    except (OverflowError, ValueError, OSError):
        return f"{at} ms"
    return moment.strftime("%Y-%m-%d %H:%M:%S") + f".{at % 1000:03d}Z"


def _cell(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|")


def _what(entry: Entry) -> str:
    f = entry.fields
    op = entry.op
    if op in ("write", "update"):
        memory = entry.memory
        version = f.get("version", 1)
        if memory is None:  # pragma: no cover - decode_entry always sets it
            return f"v{version}"
        text = f"{memory.type_name} v{version}"
        return _cell(f"{text}: {memory.text}" if memory.text else text)
    if op == "head":
        return f"head moved to v{f['version']}"
    if op == "tombstone":
        return _cell(f"tombstoned: {f['reason']}" if "reason" in f else "tombstoned")
    if op == "status":
        return f"status: {f['status']}"
    if op == "edge":
        return (
            f"{f['rel']} `{f['dst'].hex()[:12]}` (strength {f['strength'] / 1e6:g},"
            f" {f['status']}, {f['origin']})"
        )
    if op == "unedge":
        return f"removed {f['rel']} `{f['dst'].hex()[:12]}`"
    return f"read {len(f['ids'])} memories"  # access


def export_markdown(
    cx: Cortex, out: TextIO, *, since: int = 0, progress: Progress | None = None
) -> int:
    """Write the journal after ``since`` to ``out`` as a Markdown table, for people.

    One row per entry (seq, time in UTC, op, namespace, memory id, what changed); texts
    are cut to 100 characters. Not importable: export JSON Lines for that.

    Returns:
        How many entries were written.
    """
    header = _header(cx, since)
    out.write(f"# Journal of `{cx.actor}`\n\n")
    out.write(
        f"Entries {header.since + 1} to {header.last_seq} of {header.last_seq};"
        f" hash {header.hash_name}; OverallRoot `{header.overall_root.hex()}`.\n\n"
    )
    out.write("| seq | at (UTC) | op | ns | memory | what |\n")
    out.write("|---:|---|---|---|---|---|\n")
    count = 0
    for entry, _ in _entries(cx, header, progress):
        memory = entry.memory_id.hex()[:12] if entry.op != "access" else ""
        out.write(
            f"| {entry.seq} | {_when(entry.at)} | {entry.op} | {entry.ns} |"
            f" {f'`{memory}`' if memory else ''} | {_what(entry)} |\n"
        )
        count += 1
    return count


# ---------------------------------------------------------------------------
# reading a file


@contextmanager
def _binary(source: BinaryIO | str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    if isinstance(source, (str, os.PathLike)):
        with Path(source).open("rb") as stream:
            yield stream
    elif isinstance(source, io.TextIOBase):
        raise JournalFileError(
            "open the file in binary mode ('rb'): lines are checked as UTF-8 bytes", line=None
        )
    else:
        yield source


class _Lines:
    """The lines of a binary stream, each checked for length, its end and UTF-8, then
    parsed as a JSON object; ``number`` is the 1-based number of the last line read."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.number = 0

    def next(self) -> dict[str, Any] | None:
        """The next line as a JSON object, or None at the end of the file."""
        raw = self.stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return None
        self.number += 1
        if not raw.endswith(b"\n"):
            if len(raw) > MAX_LINE_BYTES:
                raise self.error(
                    f"the line is longer than {MAX_LINE_BYTES:,} bytes (the most an import"
                    " reads)"
                )
            raise self.error("the line is cut (no newline at its end): the file is truncated")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"not valid UTF-8 (at byte {exc.start})") from None
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise self.error(f"not JSON: {exc.msg} at column {exc.colno}") from None
        except (ValueError, RecursionError) as exc:  # an integer of over 4300 digits; nesting
            raise self.error(f"not JSON this import reads: {exc}") from None
        if type(value) is not dict:
            raise self.error(f"not a JSON object but {type(value).__name__}")
        return value

    def error(self, message: str) -> JournalFileError:
        return JournalFileError(message, line=self.number)


def _parse_header(value: dict[str, Any] | None) -> JournalHeader:
    if value is None:
        raise JournalFileError("the file is empty (it must start with a header line)", line=1)

    def bad(message: str) -> JournalFileError:
        return JournalFileError(f"header: {message}", line=1)

    if value.get("format") != FORMAT:
        raise bad(f"not a cortexgraph journal export (format {value.get('format')!r})")
    if value.get("version") != FORMAT_VERSION:
        raise bad(
            f"format version {value.get('version')!r} is not supported (this cortexgraph"
            f" reads version {FORMAT_VERSION})"
        )
    for name in ("actor", "hash_name", "overall_root"):
        if type(value.get(name)) is not str:
            raise bad(f"{name!r} is missing or not a string")
    for name in ("since", "last_seq"):
        if type(value.get(name)) is not int or value[name] < 0:
            raise bad(f"{name!r} is missing or not a non-negative integer")
    if value["since"] > value["last_seq"]:
        raise bad(f"since ({value['since']}) is past last_seq ({value['last_seq']})")
    if not _HEX_ROOT.fullmatch(value["overall_root"]):
        raise bad("'overall_root' is not 64 lowercase hex digits")
    return JournalHeader(
        actor=value["actor"],
        hash_name=value["hash_name"],
        since=value["since"],
        last_seq=value["last_seq"],
        overall_root=bytes.fromhex(value["overall_root"]),
    )


def _parse_entry(
    lines: _Lines, value: dict[str, Any], header: JournalHeader, seq: int
) -> bytes:
    """The CBOR bytes of one entry line, after checking the line against itself and
    against the seq it must hold."""
    missing = [name for name in _LINE_FIELDS if name not in value]
    if missing:
        raise lines.error(f"missing field(s) {', '.join(missing)}")
    if seq > header.last_seq:
        raise lines.error(
            f"an entry past the header's last seq ({header.last_seq}): the file holds more"
            " than its header promises"
        )
    if type(value["seq"]) is not int or value["seq"] != seq:
        raise lines.error(f"seq gap: expected entry {seq}, found {value['seq']!r}")
    if value["actor"] != header.actor:
        raise lines.error(
            f"the entry is actor {value['actor']!r}'s; the header's is {header.actor!r}"
        )
    if type(value["cbor"]) is not str:
        raise lines.error("'cbor' is not a string")
    try:
        data = base64.b64decode(value["cbor"], validate=True)
    except (binascii.Error, ValueError):
        raise lines.error("'cbor' is not valid base64") from None
    try:
        entry = decode_entry(data)
    except CorruptionError as exc:
        raise lines.error(f"'cbor' does not decode as a journal entry: {exc}") from None
    if entry.seq != seq:
        raise lines.error(f"the CBOR holds entry {entry.seq}, the line says {seq}")
    if value["op"] != entry.op:
        raise lines.error(f"the line says op {value['op']!r}, the CBOR holds {entry.op!r}")
    try:
        rendered = _canonical_json(value["entry"])
    except ValueError:
        rendered = ""
    if rendered != _canonical_json(render_entry(entry)):
        raise lines.error("the 'entry' rendering disagrees with the CBOR it accompanies")
    return data


@attrs.frozen
class JournalFile:
    """A journal export read and checked line by line (:func:`read_journal`), not yet
    applied to any store.

    Attributes:
        header: its header.
        entries: ``(line number, seq, canonical CBOR)`` of each entry, in seq order.
    """

    header: JournalHeader
    entries: tuple[tuple[int, int, bytes], ...] = attrs.field(repr=lambda e: f"<{len(e)}>")


def read_journal(
    source: BinaryIO | str | os.PathLike[str], *, progress: Progress | None = None
) -> JournalFile:
    """Read a journal export and check every line, touching no store.

    Each line must be whole, UTF-8, JSON, at most :data:`MAX_LINE_BYTES`; the header must
    name this format and version; each entry line must hold the next seq, the header's
    actor, base64 that decodes to a canonical journal entry, and a rendering and op that
    agree with it; the file must hold exactly the entries the header promises.

    Args:
        source: the file's path, or a binary stream (open it with ``"rb"``).
        progress: called as ``progress(done, total)`` with the entries read so far.

    Raises:
        JournalFileError: naming the line at fault.
    """
    with _binary(source) as stream:
        lines = _Lines(stream)
        header = _parse_header(lines.next())
        total = header.last_seq - header.since
        entries: list[tuple[int, int, bytes]] = []
        while (value := lines.next()) is not None:
            seq = header.since + len(entries) + 1
            entries.append((lines.number, seq, _parse_entry(lines, value, header, seq)))
            if progress is not None and len(entries) % _PROGRESS_EVERY == 0:
                progress(len(entries), total)
    if len(entries) != total:
        raise JournalFileError(
            f"the file ends after entry {header.since + len(entries)}, but its header"
            f" promises entries up to {header.last_seq}: the file is truncated",
            line=lines.number + 1,
        )
    if progress is not None:
        progress(total, total)
    return JournalFile(header, tuple(entries))


# ---------------------------------------------------------------------------
# import


def import_journal(
    cx: Cortex,
    source: JournalFile | BinaryIO | str | os.PathLike[str],
    *,
    progress: Progress | None = None,
) -> ImportReport:
    """Replay a journal export into ``cx``, all or nothing (see the module doc).

    Args:
        source: the file's path, a binary stream (open it with ``"rb"``), or a file
            :func:`read_journal` already read and checked.
        progress: called as ``progress(done, total)``. Given a path or a stream,
            ``total`` is twice the file's entries: each is counted once when read and
            checked, once when applied; given a :class:`JournalFile`, it is the entries.

    Returns:
        An :class:`ImportReport`.

    Raises:
        JournalFileError: the file cannot be imported; the message names the line (see
            the class for the cases). The store is unchanged.
        ReadOnlyError: ``cx`` is read-only.
        CortexError: called inside a batch.
    """
    if isinstance(source, JournalFile):
        journal, offset = source, 0
    else:
        journal = read_journal(
            source, progress=None if progress is None else lambda d, t: progress(d, 2 * t)
        )
        offset = len(journal.entries)
    header, entries = journal.header, journal.entries
    if header.actor != cx.actor:
        raise JournalFileError(
            f"the file holds actor {header.actor!r}'s journal; this store is actor"
            f" {cx.actor!r}'s",
            line=1,
        )
    if header.hash_name != cx.hash_name:
        raise JournalFileError(
            f"the file's entries were committed with {header.hash_name}; this store hashes"
            f" with {cx.hash_name}",
            line=1,
        )
    line_of = {seq: line for line, seq, _ in entries}

    def step(done: int, total: int) -> None:
        if progress is not None:
            progress(offset + done, offset + total)

    try:
        applied = cx.append_entries(
            [(seq, data) for _, seq, data in entries],
            expect_root=(header.last_seq, header.overall_root),
            progress=step,
        )
    except ReplayError as exc:
        if exc.seq in line_of:
            raise JournalFileError(str(exc), line=line_of[exc.seq]) from None
        raise JournalFileError(str(exc), line=2 if entries else 1) from None  # starts late
    except VerificationError as exc:
        raise JournalFileError(f"header: {exc}", line=1) from None
    after = cx.roots()
    checked = applied > 0 or after.seq == header.last_seq
    return ImportReport(
        header, applied, len(entries) - applied, after.seq, after.overall_root, checked
    )
