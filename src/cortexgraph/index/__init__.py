"""The in-memory column index that ``find``, ``recall``, ``context`` and ``compact`` run on.

It is derived from the ``salience``, ``postings`` and ``journal`` tables, per open
handle, and never trusted for anything but choosing *which* memories a query returns
(what a verb returns is then read from LMDB). The one file it has is a cache: the image
of a build kept beside the store (``snapshot``), checked against the journal before a
new handle loads it instead of scanning. One module per job:

- ``table``: the columns and posting lists, built from one scan and caught up from the
  journal by seq; reports what each catch-up moved (``Change``).
- ``filter``: posting lists as arrays, a mask per atom, plans, selects and counts.
- ``score``: exact salience scores, vectorised, with the static terms kept per row.
- ``order``: select-and-sort orders, and the walks that read one type's rows by a bound.
- ``keyword``: term postings and BM25 scores.
- ``memo``: what readers derived from a row, kept until the memory changes.
- ``ppm``: rounding to parts per million, fast and exact.
- ``columns``: :class:`ColumnIndex`, the table with one of each part, as one object.
- ``snapshot``: the image of a build in ``<store>/columns.snapshot``: checked, loaded,
  and rewritten by a writable handle's close.

Parts depend on the table and on lower parts only (``order`` uses ``filter`` and
``score``) and use one another's public names only.
"""

from __future__ import annotations

from .columns import ColumnIndex
from .order import KEY_ORDERS
from .table import Rows

__all__ = ["KEY_ORDERS", "ColumnIndex", "Rows"]
