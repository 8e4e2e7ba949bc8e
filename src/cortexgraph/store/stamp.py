"""A store's generation: a number that moves whenever a write commits, read without opening
the store (only LMDB is imported), for caches of what was computed from a store."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import lmdb

from ..errors import StorageError

__all__ = ["store_generation"]


def store_generation(root: str | os.PathLike[str], actor: str) -> int:
    """The id of the last write transaction committed to the store ``<root>/<actor>``.

    It grows by one with every commit (a batch, a single write, an access record, a
    compaction), and never otherwise: reading the store, even read-write, leaves it
    unchanged. A cache of something computed from the store (a rendered summary, a
    ranking) is still valid while the generation it was computed at is the current one.
    Only LMDB is imported and the store's tables are not opened, so the call costs about
    a millisecond.

    >>> import tempfile, cortexgraph as cg
    >>> root = tempfile.mkdtemp()
    >>> cg.store_generation(root, "agent")          # no store yet
    0
    >>> with cg.open(root, "agent") as cx:
    ...     before = cg.store_generation(root, "agent")
    ...     _ = cx.write(cg.Fact(text="Deploys go through CI"))
    >>> cg.store_generation(root, "agent") == before + 1
    True

    Returns:
        The transaction id, or 0 when there is no store at that place.

    Raises:
        StorageError: the environment exists but LMDB cannot read it.
    """
    path = Path(root) / actor
    if not (path / "data.mdb").is_file():
        return 0
    opened = _open_here(path)
    if opened is not None:
        return opened
    try:
        env = lmdb.open(str(path), readonly=True, subdir=True, lock=True, max_dbs=0)
    except lmdb.Error as exc:
        raise StorageError(f"{path} cannot be read: {exc}") from exc
    try:
        return int(env.info()["last_txnid"])
    finally:
        env.close()


def _open_here(path: Path) -> int | None:
    """The generation read through this process's own open environment of ``path``, if
    there is one (LMDB allows one open per process, so a second open would fail)."""
    env_module = sys.modules.get("cortexgraph.store.env")
    if env_module is None:  # nothing was ever opened here
        return None
    return env_module.open_generation(path)  # type: ignore[no-any-return]
