"""A full disk: a typed error that says space ran out, the failed batch absent, and the
store reopens and verifies once space is freed.

The real thing runs in a child process on a 6 MiB tmpfs mounted in a private mount
namespace (``unshare --user --map-root-user --mount``, which needs no privilege where the
kernel allows user namespaces): ``scripts/disk_full_child.py`` fills the file system and
writes batches until one fails. LMDB reports a full tmpfs as EIO (a short write), so the
translation of errors is also tested on its own, for each errno a full disk can show as.
"""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest

import cortexgraph as cg
from cortexgraph.store import guards as store_guards

CHILD = Path(__file__).parent / "scripts" / "disk_full_child.py"


def _private_tmpfs_works(where: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {where}"],
        capture_output=True,
    )
    return probe.returncode == 0


@pytest.mark.slow
def test_a_full_disk_fails_one_batch_whole_and_the_store_recovers(tmp_path: Path) -> None:
    """On a full tmpfs the failing batch raises StorageFullError saying space ran out;
    after the filler is deleted the store reopens with every committed batch whole and
    none of the failed one, verifies, and takes new writes."""
    mount = tmp_path / "fs"
    mount.mkdir()
    if not _private_tmpfs_works(mount):
        pytest.skip("this machine allows no private tmpfs mount (unshare -rm), so no disk fills")
    script = f"mount -t tmpfs -o size=6m tmpfs {mount} && exec {sys.executable} {CHILD} {mount}"
    run = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    failed, recovered = (json.loads(line) for line in run.stdout.splitlines())
    assert failed["error"] == "StorageFullError" and failed["typed"]
    assert "no space left" in failed["message"]
    committed = failed["committed"]
    assert recovered["counts"][: committed + 1] == [40] * (committed + 1)
    assert recovered["counts"][committed + 1] == 0  # the failed batch left nothing
    assert recovered["seq_after_reopen"] == failed["seq"]
    assert recovered["readable"] == "written after space was freed"
    assert recovered["verify_ok"], recovered["problems"]


def _lmdb_error(kind: type[lmdb.Error], code: int) -> lmdb.Error:
    exc = kind("mdb_txn_commit", code)
    exc.code = code  # what py-lmdb sets on the errors LMDB itself raises
    return exc


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG])
def test_full_disk_errnos_are_storage_full(tmp_path: Path, code: int) -> None:
    """ENOSPC, a quota and a file size limit are StorageFullError, naming the operation."""
    error = store_guards.storage_error(
        _lmdb_error(lmdb.Error, code), tmp_path, table="journal", operation="commit"
    )
    assert type(error) is cg.StorageFullError
    assert (error.table, error.operation) == ("journal", "commit")
    assert "no space left" in str(error)


@pytest.mark.parametrize(
    ("free", "kind"), [(1 << 20, cg.StorageFullError), (1 << 34, cg.StorageError)]
)
def test_an_io_error_is_a_full_disk_only_when_space_is_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free: int, kind: type[cg.CortexError]
) -> None:
    """LMDB turns a short write into EIO: with less than FULL_DISK_MARGIN free it is a
    full disk, otherwise an I/O error (StorageError, not StorageFullError)."""
    monkeypatch.setattr(store_guards, "free_bytes", lambda path: free)
    error = store_guards.storage_error(
        _lmdb_error(lmdb.Error, errno.EIO), tmp_path, operation="commit"
    )
    assert type(error) is kind


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (lmdb.CorruptedError, cg.CorruptionError),
        (lmdb.PageNotFoundError, cg.CorruptionError),
        (lmdb.BadTxnError, cg.CorruptionError),
        (lmdb.ReadersFullError, cg.StorageError),
        (lmdb.PanicError, cg.StorageError),
        (lmdb.ReadonlyError, cg.ReadOnlyError),
    ],
)
def test_lmdb_errors_become_typed_errors(
    tmp_path: Path, kind: type[lmdb.Error], expected: type[cg.CortexError]
) -> None:
    """Each LMDB error class maps to the documented CortexError."""
    error = store_guards.storage_error(_lmdb_error(kind, -30000), tmp_path, operation="get")
    assert type(error) is expected
