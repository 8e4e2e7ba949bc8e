"""What readers derived from a row (a decoded record, say), kept until the memory changes.

Reading a memory's record costs LMDB reads and a decode; ``find`` and ``context`` return
the same few memories again and again. A memo keeps, per row, what a reader derived from
it, tagged with the row's generation (the ``gen`` column: the seq of the last journal
entry that changed the memory's head, status or versions).

Invariants:

- A memo is returned only for a state in which the memory is as it was when the memo was
  kept: its generation unchanged, and the reader's seq not before the one it was kept at.
- A memo is kept only when the table stands at the reader's seq, so that the generation
  it is tagged with is the one the value was read at.
- At most ``_MEMO_LIMIT`` memos are kept; at the limit the older half go. A build drops
  them all (rows are numbered afresh).
"""

from __future__ import annotations

import itertools
from typing import Any

from .table import Change, Table

__all__ = ["Memos"]

#: per-row memos kept at most; at the limit, the older half go
_MEMO_LIMIT = 32_768


class Memos:
    """Per-row memos over one :class:`Table`."""

    def __init__(self, table: Table) -> None:
        self._table = table
        #: per row: its generation, the seq it holds from, the value
        self._memos: dict[int, tuple[int, int, Any]] = {}

    def __len__(self) -> int:
        return len(self._memos)

    def follow(self, change: Change) -> None:
        """Drop every memo when ``change`` renumbered the rows (under the table's lock)."""
        if change.rebuilt:
            self._memos = {}

    def memo(self, row: int, seq: int) -> Any:
        """What :meth:`remember` kept for ``row``, if it holds for the state at journal
        seq ``seq`` (the memory's head, status and versions unchanged since it was
        kept, and not changed after ``seq``); else None."""
        kept = self._memos.get(row)
        if kept is None:
            return None
        gen, since, value = kept
        return value if since <= seq and gen == self._table.cols["gen"].item(row) else None

    def remember(self, row: int, value: Any, seq: int) -> None:
        """Keep ``value``, derived from ``row``'s memory as a read transaction at journal
        seq ``seq`` saw it (a decoded record, say), until the memory changes. Kept only
        when the columns stand at that same seq, so that the row's generation is the one
        the value was read at."""
        table = self._table
        with table.lock:
            if table.seq != seq:
                return
            memos = self._memos
            if len(memos) >= _MEMO_LIMIT:  # forget the older half (dicts keep insertion order)
                for old in list(itertools.islice(memos, _MEMO_LIMIT // 2)):
                    del memos[old]
            gen = int(table.cols["gen"][row])
            memos[row] = (gen, gen or table.built_at, value)
