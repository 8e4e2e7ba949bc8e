"""Derived tables held in memory while a whole journal is replayed, then written in bulk.

A rebuild or a verification replays every entry through the same code a write uses
(``writing.EntryWriter``, so J4 holds by construction), but it has no reader to serve
until the end. :class:`MemTxn` gives that code the read and write calls of a write
transaction over plain dicts, so a replay pays a dict operation per row instead of an
LMDB ``get``/``put`` through a growing B-tree; at the end :meth:`MemTxn.sorted_items`
hands each table over in key order, which ``WriteTxn.put_sorted`` appends to an emptied
table page by page (a rebuild) and a verification compares with the store's own table.

Invariants:

- A ``get`` sees every ``put`` and ``delete`` made before it, as a write transaction does.
- Ordered reads (``iter_items``, ``prefix_range``, ``iter_prefix``) give the keys in
  byte order, as LMDB's cursors do; the sorted key list of a table is rebuilt only when a
  key was added or removed since the last ordered read.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

__all__ = ["MemTxn"]


class MemTxn:
    """The tables of a replay in memory (see the module doc)."""

    __slots__ = ("_keys", "entries", "tables")

    def __init__(self, tables: Iterable[str]) -> None:
        self.tables: dict[str, dict[bytes, bytes]] = {name: {} for name in tables}
        self._keys: dict[str, list[bytes] | None] = dict.fromkeys(self.tables)
        self.entries = 0

    def get(self, table: str, key: bytes) -> bytes | None:
        return self.tables[table].get(key)

    def put(self, table: str, key: bytes, value: bytes) -> None:
        rows = self.tables[table]
        if key not in rows:
            self._keys[table] = None
        rows[key] = value

    def delete(self, table: str, key: bytes) -> None:
        if self.tables[table].pop(key, None) is not None:
            self._keys[table] = None

    def apply_mutations(self, mutations: list[tuple[str, bytes, bytes | None]]) -> None:
        """Put or delete each ``(table, key, value)``; ``None`` deletes."""
        tables, keys = self.tables, self._keys
        for table, key, value in mutations:
            rows = tables[table]
            if value is None:
                if rows.pop(key, None) is not None:
                    keys[table] = None
            else:
                if key not in rows:
                    keys[table] = None
                rows[key] = bytes(value)

    def append_entry(self, seq: int, data: bytes) -> None:
        """Count an entry: a replay of a store's own journal does not copy it."""
        self.entries += 1

    def _sorted(self, table: str) -> list[bytes]:
        keys = self._keys[table]
        if keys is None:
            keys = self._keys[table] = sorted(self.tables[table])
        return keys

    def iter_items(
        self, table: str, prefix: bytes, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs whose key starts with ``prefix``, in byte order (from
        the first key at or above ``start``, when given)."""
        keys = self._sorted(table)
        rows = self.tables[table]
        begin = prefix if start is None else max(start, prefix)
        for i in range(bisect.bisect_left(keys, begin), len(keys)):
            key = keys[i]
            if not key.startswith(prefix):
                return
            yield key, rows[key]

    def iter_prefix(self, table: str, prefix: bytes) -> Iterator[bytes]:
        """Keys that start with ``prefix``, in byte order."""
        for key, _ in self.iter_items(table, prefix):
            yield key

    def prefix_range(self, table: str, prefix: bytes) -> tuple[list[bytes], list[bytes]]:
        """:meth:`iter_items` as two lists (keys, values)."""
        pairs = list(self.iter_items(table, prefix))
        return [k for k, _ in pairs], [v for _, v in pairs]

    def sorted_items(self, table: str) -> list[tuple[bytes, bytes]]:
        """Every row of ``table`` in key order."""
        rows = self.tables[table]
        return [(key, rows[key]) for key in self._sorted(table)]

    def count(self, table: str) -> int:
        return len(self.tables[table])
