"""Opening, closing and sharing environments: clear errors, never a crash."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph.store.journal_log import boot_id


def test_environment_lives_at_root_slash_actor(tmp_path: Path) -> None:
    """One LMDB environment per actor at <root>/<actor>/, with LMDB's own files, the
    writer lock that keeps one batch at a time across processes and, once a durable handle
    on Linux has written, the journal log (its dirty marker is gone after a clean close)."""
    with cg.open(tmp_path, "alice") as a, cg.open(tmp_path, "bob") as b:
        a.write(cg.Fact(text="alice's"))
        assert b.seq == 0
        assert a.path == tmp_path / "alice"
    files = sorted(p.name for p in (tmp_path / "alice").iterdir())
    logged = ["journal.log"] if boot_id() is not None else []
    assert files == sorted(["data.mdb", "lock.mdb", "writer.lock", *logged])


def test_second_open_in_one_process_is_a_clear_error(tmp_path: Path) -> None:
    """LMDB allows one open per process: the second gets AlreadyOpenError (read-only too),
    and after close the environment opens again."""
    cx = cg.open(tmp_path, "agent")
    with pytest.raises(cg.AlreadyOpenError, match="reuse that Cortex handle"):
        cg.open(tmp_path, "agent")
    with pytest.raises(cg.AlreadyOpenError):
        cg.open(tmp_path, "agent", readonly=True)
    cx.close()
    with cg.open(tmp_path, "agent") as again:
        assert again.seq == 0


def test_double_close_is_harmless_and_use_after_close_is_an_error(tmp_path: Path) -> None:
    """close() twice does nothing the second time; any use afterwards raises CortexError
    (not a segfault from a closed LMDB handle)."""
    cx = cg.open(tmp_path, "agent")
    uri = cx.write(cg.Fact(text="x"))
    cx.close()
    cx.close()
    assert cx.closed
    for call in (
        lambda: cx.resolve(uri),
        lambda: cx.write(cg.Fact(text="y")),
        lambda: list(cx.journal()),
        lambda: cx.seq,
        lambda: cx.table_digests(),
    ):
        with pytest.raises(cg.CortexError, match="closed"):
            call()


def test_close_inside_a_batch_is_refused(tmp_path: Path) -> None:
    """Closing the handle while one of its batches is open would free the transaction
    under it; it is refused and the batch still commits."""
    with cg.open(tmp_path, "agent") as cx:
        with cx.batch() as b:
            b.write(cg.Fact(text="x"))
            with pytest.raises(cg.CortexError, match="inside one of its batches"):
                cx.close()
        assert cx.seq == 1


def test_iterating_the_journal_after_close_fails_cleanly(tmp_path: Path) -> None:
    """A journal iterator that outlives its handle raises CortexError on the next chunk."""
    cx = cg.open(tmp_path, "agent")
    with cx.batch() as b:
        for i in range(600):
            b.write(cg.Event(text=f"e{i}"), at=i)
    feed = cx.journal()
    first = [next(feed) for _ in range(512)]
    assert first[-1].seq == 512
    cx.close()
    with pytest.raises(cg.CortexError, match="closed"):
        list(feed)


def test_missing_environment(tmp_path: Path) -> None:
    """create=False and readonly=True need an existing environment: NotFoundError, and
    nothing is created."""
    with pytest.raises(cg.NotFoundError):
        cg.open(tmp_path, "ghost", create=False)
    with pytest.raises(cg.NotFoundError):
        cg.open(tmp_path, "ghost", readonly=True)
    assert not (tmp_path / "ghost").exists()


def test_hash_is_fixed_at_creation(tmp_path: Path) -> None:
    """The hash chosen at creation is recorded; reopening with another is refused, with
    None it is kept."""
    with cg.open(tmp_path, "agent", hash_name="sha256") as cx:
        assert cx.hash_name == "sha256"
    with pytest.raises(cg.ValidationError, match="created with 'sha256'"):
        cg.open(tmp_path, "agent", hash_name="blake3")
    with cg.open(tmp_path, "agent") as cx:
        assert cx.hash_name == "sha256"
    with pytest.raises(cg.ValidationError, match="unknown hash"):
        cg.open(tmp_path, "other", hash_name="md5")


def test_environment_of_another_actor_is_refused(tmp_path: Path) -> None:
    """An environment copied under another actor's name is detected, not adopted."""
    with cg.open(tmp_path, "alice") as cx:
        cx.write(cg.Fact(text="alice's"))
    shutil.copytree(tmp_path / "alice", tmp_path / "mallory")
    with pytest.raises(cg.CorruptionError, match="belongs to actor 'alice'"):
        cg.open(tmp_path, "mallory")


def test_ids_differ_between_actors_and_namespaces(tmp_path: Path) -> None:
    """The same memory written at the same seq gets different ids per actor and per ns."""
    memory = cg.Fact(text="same body")
    with cg.open(tmp_path, "alice") as a, cg.open(tmp_path, "bob") as b:
        ua = a.write(memory, at=1)
        ub = b.write(memory, at=1)
        uc = a.write(memory, ns="other", at=1)
    assert len({ua.id, ub.id, uc.id}) == 3


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() exists only on POSIX")
def test_handle_is_unusable_in_a_forked_child(tmp_path: Path) -> None:
    """An environment inherited across fork() must not be used by the child: every call
    raises CortexError there, and the parent keeps working."""
    cx = cg.open(tmp_path, "agent")
    uri = cx.write(cg.Fact(text="x"))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            cx.resolve(uri)
        except cg.CortexError as exc:
            code = 0 if "fork" in str(exc) else 3
        else:
            code = 2
        os.write(write, bytes([code]))
        os._exit(0)
    os.close(write)
    result = os.read(read, 1)
    os.waitpid(pid, 0)
    assert result == b"\x00", f"child saw code {result!r}"
    assert cx.resolve(uri).memory.text == "x"
    cx.close()


def test_readonly_handle_sees_later_commits(tmp_path: Path) -> None:
    """A read-only handle in another process sees each new commit of the writer
    (LMDB readers get the latest committed state at the start of each read)."""
    import subprocess

    with cg.open(tmp_path, "agent") as cx:
        cx.write(cg.Fact(text="one"))
    script = (
        "import cortexgraph as cg, sys\n"
        f"cx = cg.open({str(tmp_path)!r}, 'agent', readonly=True)\n"
        "print(cx.seq)\n"
    )
    with cg.open(tmp_path, "agent") as cx:
        cx.write(cg.Fact(text="two"))
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"
