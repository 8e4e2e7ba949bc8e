"""A persisted image of the column index, so a new process need not scan the store.

A process's first query builds the column index (``table``) from one scan of every
memory's attributes row: about 5 µs a memory, 50 ms at 10,000, paid again by every short
process (a Claude Code hook runs one per prompt). :class:`SnapshotFile` keeps the image
of a build (:class:`~.table.TableImage`) in one file beside the store; a new process
loads it (about 5 ms at 10,000 memories) and catches up from the journal by seq as every
open handle does (about 20 µs an entry).

The file is derived state of derived state: never part of the commitments, never needed
for a correct answer, never trusted without checks. A missing, damaged, stale or foreign
file is passed over and the index is built from the store as if there were none.

File (``<store>/columns.snapshot``)::

    offset 0        8          12         20                              size-32
           +--------+----------+----------+------------ ... -----------+---------+
           | magic  | format   | seq      | body (canonical CBOR map)  | BLAKE3  |
           +--------+----------+----------+------------ ... -----------+---------+
    magic b"CGCOLIDX"; format u32be; seq u64be (the journal seq the image reflects);
    BLAKE3-256 of every byte before it.

    body: {"identity": the store's identity record (schema, actor, hash name),
           "root": the MMR root of the first seq journal entries (RFC 6962 MTH),
           "count": rows, "ids": 16 bytes a row, in id order,
           "columns": {name: little-endian array bytes} (``table.STORED_COLUMNS``),
           "tag_sets": [[tag, ...], ...], "tag_of": i4 per row,
           "ns_names": [namespace, ...]}

Invariants:

- CS1 a file is used only when its checksum, magic and format match, its identity is the
  store's, the MMR root of the store's first seq journal entries is the recorded one, its
  seq is at most the store's and at most :func:`catch_up_limit` entries behind it, and
  its content is well formed (lengths, codes in range, ids strictly increasing). Then
  loading it and catching up gives the table a build at its seq followed by the same
  catch-up gives, row for row (and a build at the store's seq, memory for memory).
- CS2 a file is written whole under a temporary name unique to the process and thread,
  then renamed over the old one, so readers and other writers see the old file or the
  new one, never a mix. It is not fsynced: a file torn by a crash fails its checksum.
- CS3 only a writable handle whose column index was built (a read used it) writes it,
  when it closes (``Handle.save_column_snapshot``), and only once the store is
  :data:`SNAPSHOT_EVERY` entries past the file on disk (or the file is missing, ahead or
  was found unusable): a reader catches up at most about that many entries while such
  handles close now and then.
"""

from __future__ import annotations

import itertools
import os
import struct
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import blake3
import numpy as np

from ..core.codec import decode_unchecked, encode
from ..core.commitments import mmr_getter
from ..core.keys import ID_SIZE
from ..core.mmr import mmr_root
from ..errors import CortexError
from ..store.txn import ReadTxn
from .table import CATCH_UP_LIMIT, STATUS_CODE, STORED_COLUMNS, TYPE_NAME, TableImage

__all__ = ["FORMAT", "SNAPSHOT_EVERY", "SNAPSHOT_FILE", "SnapshotFile", "catch_up_limit"]

#: the layout and meaning of the file: bump it whenever the file's layout changes or a
#: build computes any stored column, tag set or namespace differently, so that files
#: written by another version are passed over rather than served
FORMAT = 2
SNAPSHOT_FILE = "columns.snapshot"
#: a writable handle rewrites the file on close once the store is this many journal
#: entries past it: a reader then catches up at most about this many (about 5 ms)
SNAPSHOT_EVERY = 256

_MAGIC = b"CGCOLIDX"
_HEADER = struct.Struct(">8sIQ")
_DIGEST = 32
#: the dtypes of the stored columns in the file: little-endian, whatever the machine
_FILE_DTYPES = {name: np.dtype(dtype).newbyteorder("<") for name, dtype in STORED_COLUMNS.items()}
_TAG_DTYPE = np.dtype("<i4")
_STATUS_CODES = {code: name for name, code in STATUS_CODE.items()}
_BODY_KEYS = frozenset(
    {"identity", "root", "count", "ids", "columns", "tag_sets", "tag_of", "ns_names"}
)


def catch_up_limit(rows: int) -> int:
    """How many journal entries an image of ``rows`` rows may be behind the store and
    still be loaded: a catch-up costs about 20 µs an entry and a build about 5 µs a row,
    so past a quarter of the rows (and at least :data:`SNAPSHOT_EVERY`) a build is
    cheaper; never more than the in-process catch-up limit."""
    return min(CATCH_UP_LIMIT, max(SNAPSHOT_EVERY, rows // 4))


class _Unusable(Exception):
    """Why a snapshot file cannot be used (its status and the reason)."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def _journal_root(txn: ReadTxn, hash_name: str, seq: int) -> bytes | None:
    """The MMR root over the first ``seq`` journal entries (it commits to every one of
    them), from the stored nodes; None when the store cannot give it."""
    if not 1 <= seq <= txn.last_seq():
        return None
    try:
        return mmr_root(hash_name, mmr_getter(txn.get), seq)
    except CortexError:  # missing or malformed nodes: the store's problem, not ours
        return None


class SnapshotFile:
    """The snapshot file of one store: load it for a first build, write it on close.

    Attributes:
        path: the file.
        status: what the last :meth:`load` found: ``"unread"``, ``"loaded"``,
            ``"missing"``, ``"damaged"`` (checksum, format or content), ``"foreign"``
            (another store's, or another journal history up to its seq), ``"stale"`` (too
            far behind the store to catch up from) or ``"ahead"`` (past the store).
        reason: why, in words (empty when loaded).
    """

    def __init__(self, path: Path, identity: Mapping[str, Any]) -> None:
        self.path = path
        self.identity = dict(identity)
        self.hash_name = str(identity.get("hash_name", "blake3"))
        self.status = "unread"
        self.reason = ""

    # -- reading ---------------------------------------------------------------------------

    def load(self, txn: ReadTxn, last: int) -> TableImage | None:
        """The image in the file, when it matches the store ``txn`` sees at journal seq
        ``last`` (CS1); None otherwise (:attr:`status` says why). Never raises for what
        the file holds."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self.status, self.reason = "missing", f"{self.path.name} does not exist"
            return None
        except OSError as exc:
            self.status, self.reason = "damaged", f"cannot read {self.path.name}: {exc}"
            return None
        try:
            image = self._decode(data, txn, last)
        except _Unusable as exc:
            self.status, self.reason = exc.status, str(exc)
            return None
        except Exception as exc:  # a malformed body: what cbor2 or numpy made of it
            self.status, self.reason = "damaged", f"{self.path.name} is malformed: {exc!r}"
            return None
        self.status, self.reason = "loaded", ""
        return image

    def seq_on_disk(self) -> int | None:
        """The seq the file's header names, without checking the rest (None: no file,
        or not a snapshot of this format)."""
        try:
            with open(self.path, "rb") as f:
                header = f.read(_HEADER.size)
        except OSError:
            return None
        if len(header) != _HEADER.size:
            return None
        magic, version, seq = _HEADER.unpack(header)
        return seq if magic == _MAGIC and version == FORMAT else None

    def _decode(self, data: bytes, txn: ReadTxn, last: int) -> TableImage:
        if len(data) < _HEADER.size + _DIGEST:
            raise _Unusable("damaged", f"{self.path.name} is truncated")
        if blake3.blake3(data[:-_DIGEST]).digest() != data[-_DIGEST:]:
            raise _Unusable("damaged", f"{self.path.name} fails its checksum")
        magic, version, seq = _HEADER.unpack_from(data)
        if magic != _MAGIC or version != FORMAT:
            raise _Unusable("damaged", f"{self.path.name} is not a format-{FORMAT} snapshot")
        body = decode_unchecked(data[_HEADER.size : -_DIGEST], what="a column snapshot")
        if type(body) is not dict or body.keys() != _BODY_KEYS:
            raise _Unusable("damaged", f"{self.path.name} has an unexpected body")
        if body["identity"] != self.identity:
            raise _Unusable("foreign", f"{self.path.name} belongs to {body['identity']!r}")
        if seq > last:
            raise _Unusable("ahead", f"{self.path.name} is at seq {seq}, the store at {last}")
        if _journal_root(txn, self.hash_name, seq) != body["root"]:
            raise _Unusable(
                "foreign", f"{self.path.name}: the journal's first {seq} entries are not its own"
            )
        count = body["count"]
        if type(count) is not int or count < 0:
            raise _Unusable("damaged", f"{self.path.name} has a bad row count")
        if last - seq > catch_up_limit(count):
            raise _Unusable(
                "stale", f"{self.path.name} is {last - seq} entries behind the store"
            )
        return _image(seq, count, body)

    # -- writing ---------------------------------------------------------------------------

    def save(self, image: TableImage, txn: ReadTxn) -> None:
        """Write ``image`` (of the store ``txn`` sees at ``image.seq``) over the file (CS2).

        Raises:
            OSError: the file could not be written (the old one, if any, is untouched).
        """
        root = _journal_root(txn, self.hash_name, image.seq)
        if root is None:
            return  # no journal to vouch for the image (or a damaged MMR): nothing to save
        body = {
            "identity": self.identity,
            "root": root,
            "count": len(image.ids) // ID_SIZE,
            "ids": image.ids,
            "columns": {
                name: np.ascontiguousarray(image.columns[name], dtype=dtype).tobytes()
                for name, dtype in _FILE_DTYPES.items()
            },
            "tag_sets": [list(tags) for tags in image.tag_sets],
            "tag_of": np.asarray(image.tag_of, dtype=_TAG_DTYPE).tobytes(),
            "ns_names": list(image.ns_names),
        }
        data = _HEADER.pack(_MAGIC, FORMAT, image.seq) + encode(body)
        data += blake3.blake3(data).digest()
        temp = self.path.with_name(
            f"{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp"
        )
        try:
            temp.write_bytes(data)
            os.replace(temp, self.path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise


def _image(seq: int, count: int, body: dict[str, Any]) -> TableImage:
    """The image a checked body holds, its content checked too (CS1).

    Raises:
        _Unusable: the content is not that of a build (lengths, codes, id order).
    """

    def bad(what: str) -> _Unusable:
        return _Unusable("damaged", f"the column snapshot has {what}")

    ids = body["ids"]
    if type(ids) is not bytes or len(ids) != count * ID_SIZE:
        raise bad("ids of the wrong length")
    raw_columns = body["columns"]
    if type(raw_columns) is not dict or raw_columns.keys() != _FILE_DTYPES.keys():
        raise bad("the wrong columns")
    columns = {}
    for name, dtype in _FILE_DTYPES.items():
        raw = raw_columns[name]
        if type(raw) is not bytes or len(raw) != count * dtype.itemsize:
            raise bad(f"a {name} column of the wrong length")
        columns[name] = np.frombuffer(raw, dtype=dtype)
    tag_sets, ns_names, raw_tags = body["tag_sets"], body["ns_names"], body["tag_of"]
    # (type checks by ``map``: C-level iteration over tens of thousands of tag lists)
    if (
        type(tag_sets) is not list
        or not set(map(type, tag_sets)) <= {list}
        or not set(map(type, itertools.chain.from_iterable(tag_sets))) <= {str}
    ):
        raise bad("malformed tag sets")
    if type(ns_names) is not list or not set(map(type, ns_names)) <= {str}:
        raise bad("malformed namespaces")
    if type(raw_tags) is not bytes or len(raw_tags) != count * _TAG_DTYPE.itemsize:
        raise bad("a tag column of the wrong length")
    tag_of = np.frombuffer(raw_tags, dtype=_TAG_DTYPE).astype(np.int64)
    ranges = (
        (tag_of, len(tag_sets)),
        (columns["ns"], len(ns_names)),
    )
    if count and any(column.min() < 0 or column.max() >= size for column, size in ranges):
        raise bad("a tag set or namespace number out of range")
    for name, codes in (("type", TYPE_NAME), ("status", _STATUS_CODES)):
        known = np.zeros(256, dtype=np.bool_)  # the columns are u1
        known[list(codes)] = True
        if not known[columns[name]].all():
            raise bad(f"an unknown {name} code")
    words = np.frombuffer(ids, dtype=">u8")
    high, low = words[0::2], words[1::2]
    if not (
        (high[1:] > high[:-1]) | ((high[1:] == high[:-1]) & (low[1:] > low[:-1]))
    ).all():
        raise bad("ids out of order")
    return TableImage(
        seq,
        ids,
        columns,
        tuple(map(tuple, tag_sets)),
        tag_of,
        tuple(ns_names),
    )
