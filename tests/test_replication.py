"""Journal replication: a follower applies a leader's entries only after a consistency
proof from its own root, and is left unchanged by any leader it refuses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import cortexgraph as cg
from cortexgraph.replication import JournalHandler, make_server

ACTOR = "agent"
T0 = 1_700_000_000_000


def _write(root: Path, texts: list[str], start: int = 0) -> None:
    with cg.open(root, ACTOR, sync=False) as cx, cx.batch() as b:
        uris = [
            b.write(cg.Fact(text=t, tags=["deploy"]), at=T0 + start + i)
            for i, t in enumerate(texts)
        ]
        if len(uris) > 2:
            b.add_edge(uris[0], uris[1], "relates_to", at=T0 + start + 999)
            b.update(uris[2], text=texts[2] + " (revised)", at=T0 + start + 1_000)


def _state(root: Path) -> tuple[int, bytes, dict[str, str]]:
    with cg.open(root, ACTOR, readonly=True) as cx:
        digests = {
            k: v for k, v in cx.table_digests().items() if k not in ("meta", "emb", "snapshots")
        }
        return cx.seq, cx.overall_root(), digests


@contextmanager
def _serving(root: Path, handler: type[JournalHandler] = JournalHandler) -> Iterator[str]:
    with cg.open(root, ACTOR, readonly=True) as cx:
        server = make_server(cx, "127.0.0.1", 0, handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()


@pytest.mark.parametrize("over_http", [False, True])
def test_a_follower_syncs_to_the_leaders_tables_and_root(tmp_path: Path, over_http: bool) -> None:
    """An empty follower, then one a batch behind, ends with the leader's table digests
    and root; a second sync appends nothing."""
    leader, follower = tmp_path / "leader", tmp_path / "follower"
    _write(leader, [f"memory {i} about the blue cluster" for i in range(30)])

    def run() -> cg.SyncReport:
        if not over_http:
            return cg.sync(leader, follower, ACTOR)
        with _serving(leader) as url:
            return cg.sync(url, follower, ACTOR)

    first = run()
    assert first.before == 0 and first.appended == first.after == _state(leader)[0]
    assert _state(follower) == _state(leader)
    _write(leader, ["a later memory", "another", "and a third"], start=100)
    second = run()
    assert second.appended == 5 and _state(follower) == _state(leader)
    assert run().appended == 0


def _forked(tmp_path: Path) -> tuple[Path, Path]:
    """A follower synced from a leader, and a leader that rewrote that history: the same
    actor, the same number of entries and more, but a different text at seq 2."""
    leader, follower, fork = tmp_path / "leader", tmp_path / "follower", tmp_path / "fork"
    texts = [f"memory {i}" for i in range(6)]
    _write(leader, texts)
    cg.sync(leader, follower, ACTOR)
    _write(fork, [texts[0], "a rewritten memory", *texts[2:]])
    _write(fork, ["more after the fork"], start=100)
    return follower, fork


def test_a_forked_leader_is_refused_and_the_follower_is_unchanged(tmp_path: Path) -> None:
    """A leader whose journal rewrote an entry the follower holds fails the consistency
    proof: VerificationError, over a path and over HTTP, and the follower is unchanged."""
    follower, fork = _forked(tmp_path)
    before = _state(follower)
    with pytest.raises(cg.VerificationError, match="does not extend"):
        cg.sync(fork, follower, ACTOR)
    with _serving(fork) as url, pytest.raises(cg.VerificationError, match="does not extend"):
        cg.sync(url, follower, ACTOR)
    assert _state(follower) == before


def test_a_truncated_or_equal_but_different_leader_is_refused(tmp_path: Path) -> None:
    """A leader with fewer entries than the follower, or as many but another root, is
    refused and the follower is unchanged."""
    leader, follower, short = tmp_path / "leader", tmp_path / "follower", tmp_path / "short"
    _write(leader, [f"memory {i}" for i in range(6)])
    cg.sync(leader, follower, ACTOR)
    before = _state(follower)
    _write(short, [f"memory {i}" for i in range(3)])
    with pytest.raises(cg.VerificationError, match="truncated"):
        cg.sync(short, follower, ACTOR)
    other = tmp_path / "other"
    _write(other, [f"other {i}" for i in range(6)])
    with pytest.raises(cg.VerificationError, match="fork"):
        cg.sync(other, follower, ACTOR)
    assert _state(follower) == before


class _Tampering(JournalHandler):
    """Flips one bit of the last entry it serves (a man in the middle)."""

    def answer(self, path: str, query: dict[str, int]) -> tuple[int, Any]:
        status, value = super().answer(path, query)
        if path == "/v1/entries" and value["entries"]:
            seq, data = value["entries"][-1]
            value["entries"][-1] = [seq, data[:-1] + bytes((data[-1] ^ 1,))]
        return status, value


class _LyingHead(JournalHandler):
    """Claims another root than the store's."""

    def answer(self, path: str, query: dict[str, int]) -> tuple[int, Any]:
        status, value = super().answer(path, query)
        if path == "/v1/head":
            value["root"] = bytes(32)
        return status, value


@pytest.mark.parametrize("handler", [_Tampering, _LyingHead])
def test_a_tampered_http_answer_is_refused(tmp_path: Path, handler: type[JournalHandler]) -> None:
    """An entry altered in transit, or a head whose root the proof does not reach, is
    refused (VerificationError or the replay's CorruptionError) and the follower is
    unchanged."""
    leader, follower = tmp_path / "leader", tmp_path / "follower"
    _write(leader, [f"memory {i}" for i in range(4)])
    cg.sync(leader, follower, ACTOR)
    _write(leader, ["later one", "later two", "later three"], start=100)
    before = _state(follower)
    with _serving(leader, handler) as url, pytest.raises(cg.CortexError):
        cg.sync(url, follower, ACTOR)
    assert _state(follower) == before
    assert cg.sync(leader, follower, ACTOR).appended == 5


def test_a_signed_checkpoint_is_required_with_a_key(tmp_path: Path) -> None:
    """With key=, the leader's state must carry a checkpoint signed with it at the size
    pulled: without one the sync is refused, with one it goes through; the wrong key is
    refused."""
    leader, follower = tmp_path / "leader", tmp_path / "follower"
    _write(leader, [f"memory {i}" for i in range(4)])
    key = cg.SigningKey.generate("cortexgraph/agent")
    other = cg.SigningKey.generate("cortexgraph/agent")
    with pytest.raises(cg.VerificationError, match="no checkpoint"):
        cg.sync(leader, follower, ACTOR, key=key.verifier)
    with cg.open(leader, ACTOR) as cx:
        cx.snapshot(at=T0 + 5_000, sign_with=key)
    with pytest.raises(cg.VerificationError):
        cg.sync(leader, follower, ACTOR, key=other.verifier)
    expected = _state(leader)
    with _serving(leader) as url:
        assert cg.sync(url, follower, ACTOR, key=key.verifier).appended == expected[0]
    assert _state(follower) == expected


_SYNC = textwrap.dedent(
    """
    import sys
    import cortexgraph as cg
    from cortexgraph.core import journal

    leader, follower = sys.argv[1], sys.argv[2]
    real = journal.apply
    count = 0

    def slow(*args, **kwargs):
        global count
        count += 1
        if count == 200:
            print("inside", flush=True)
            sys.stdin.readline()  # the test kills the process here
        return real(*args, **kwargs)

    import cortexgraph.writing as writing
    writing.apply = slow
    cg.sync(leader, follower, "agent")
    print("done", flush=True)
    """
)


def test_a_follower_killed_mid_sync_holds_a_prefix_the_next_sync_completes(
    tmp_path: Path,
) -> None:
    """SIGKILL while the follower applies the pulled entries leaves it at its old state (a
    prefix of the leader's, verifiable), and the next sync completes it."""
    leader, follower = tmp_path / "leader", tmp_path / "follower"
    _write(leader, [f"memory {i}" for i in range(20)])
    cg.sync(leader, follower, ACTOR)
    before = _state(follower)
    _write(leader, [f"later {i}" for i in range(400)], start=1_000)
    script = tmp_path / "sync.py"
    script.write_text(_SYNC)
    # the script patches a function of a compiled module: it runs the sources
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), CORTEXGRAPH_PURE_PYTHON="1")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(leader), str(follower)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdin is not None
    try:
        assert proc.stdout.readline().strip() == "inside"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stdin.close()
    assert _state(follower) == before
    assert cg.verify(follower, ACTOR).ok
    report = cg.sync(leader, follower, ACTOR)
    assert report.before == before[0] and report.after == _state(leader)[0]
    assert _state(follower) == _state(leader)


def test_the_sync_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`cortexgraph sync SRC DST --json` prints the report and exits 0; a refused leader
    exits 1 with the reason on stderr."""
    import json

    from cortexgraph.cli import main

    leader = tmp_path / "leader"
    _write(leader, [f"memory {i}" for i in range(5)])
    code = main(["sync", str(leader), str(tmp_path / "follower"), "--actor", ACTOR, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["appended"] == report["after"] == _state(leader)[0]
    follower, fork = _forked(tmp_path / "again")
    assert main(["sync", str(fork), str(follower), "--actor", ACTOR]) == 1
    assert "does not extend" in capsys.readouterr().err


def test_sync_from_a_serve_journal_process(tmp_path: Path) -> None:
    """A second process runs `cortexgraph serve-journal` on 127.0.0.1 (a free port, its
    URL printed as JSON); a follower syncs from it to the leader's tables and root."""
    import json

    leader, follower = tmp_path / "leader", tmp_path / "follower"
    _write(leader, [f"memory {i} about queues" for i in range(12)])
    expected = _state(leader)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    command = [sys.executable, "-m", "cortexgraph.cli", "serve-journal", "--root", str(leader)]
    command += ["--actor", ACTOR, "--port", "0", "--json"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stdout is not None
        url = json.loads(server.stdout.readline())["url"]
        assert url.startswith("http://127.0.0.1:")
        report = cg.sync(url, follower, ACTOR)
    finally:
        server.terminate()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()
    assert report.appended == expected[0]
    assert _state(follower) == expected
