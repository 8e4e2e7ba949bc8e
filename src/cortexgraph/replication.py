"""Journal replication: a follower pulls the entries it lacks from a leader, and applies
them only after a consistency proof links its own root to the leader's.

A leader is another store of the same actor, given as a path (the store root, as
:func:`cortexgraph.open` takes it) or as the URL of a ``cortexgraph serve-journal`` process
(``http://127.0.0.1:PORT``). :func:`sync` asks the leader for its size and OverallRoot, a
consistency proof from the follower's size to the leader's, and the missing entries; it
checks the proof against the follower's *own* root (computed locally, never taken from the
leader), and appends the entries in one write transaction that requires the leader's root
at the end (``Cortex.append_entries(expect_root=...)``). So:

- a leader whose journal rewrote an entry the follower holds (a fork), or is shorter than
  the follower's (truncated), or answers with a proof that does not link the two roots, is
  refused with :class:`~cortexgraph.errors.VerificationError`, and the follower is left
  unchanged;
- entries altered in transit make the replay fail or end at another root: the transaction
  is aborted and the follower is unchanged;
- a follower killed mid-sync holds its old state (one transaction), which is a prefix of
  the leader's, and the next sync completes it.

With ``key``, the leader's state must also carry a checkpoint signed with that key at the
size being pulled (``cx.snapshot(sign_with=...)`` on the leader), checked before anything
is applied.

The HTTP protocol (:func:`make_server` serves it, stdlib only; responses are canonical
CBOR, ``application/cbor``)::

    GET /v1/head                     {"actor", "seq", "root"}
    GET /v1/proof?old=N&new=M        {"proof": ConsistencyProof.encode()}
    GET /v1/entries?since=N&until=M  {"entries": [[seq, entry bytes], ...]}
    GET /v1/checkpoint?seq=N         {"note": signed note text} (404 without one)
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import takewhile
from pathlib import Path
from typing import Any, Protocol

import attrs

from .core.codec import decode, encode
from .core.consistency import ConsistencyProof, verify_consistency
from .cortex import Cortex
from .cortex import open as open_store
from .errors import CortexError, StorageError, ValidationError, VerificationError
from .signing import VerifierKey

__all__ = ["SyncReport", "make_server", "sync"]

#: entries fetched per HTTP request
_PAGE = 10_000
_TIMEOUT_S = 60.0


@attrs.frozen
class SyncReport:
    """What one :func:`sync` did.

    Attributes:
        actor: the actor both stores belong to.
        before: the follower's seq before the sync.
        after: its seq after (the leader's when anything was pulled).
        appended: how many entries were appended.
        root: the follower's OverallRoot after the sync, hex.
    """

    actor: str
    before: int
    after: int
    appended: int
    root: str

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


class _Leader(Protocol):
    def head(self) -> tuple[int, bytes]: ...
    def proof(self, old: int, new: int) -> ConsistencyProof: ...
    def entries(self, since: int, until: int) -> list[tuple[int, bytes]]: ...
    def checkpoint(self, seq: int) -> str | None: ...
    def close(self) -> None: ...


class _LocalLeader:
    """A leader store on this machine, opened read-only."""

    def __init__(self, root: Path, actor: str) -> None:
        self.cx = open_store(root, actor, readonly=True)

    def head(self) -> tuple[int, bytes]:
        return self.cx.seq, self.cx.overall_root()

    def proof(self, old: int, new: int) -> ConsistencyProof:
        return self.cx.prove_consistency(old, new)

    def entries(self, since: int, until: int) -> list[tuple[int, bytes]]:
        return _entries_between(self.cx, since, until)

    def checkpoint(self, seq: int) -> str | None:
        return _note_at(self.cx, seq)

    def close(self) -> None:
        self.cx.close()


def _entries_between(cx: Cortex, since: int, until: int) -> list[tuple[int, bytes]]:
    """The journal entries with ``since < seq <= until`` (the read stops at ``until``)."""
    return list(takewhile(lambda item: item[0] <= until, cx.journal_bytes(since)))


def _note_at(cx: Cortex, seq: int) -> str | None:
    for checkpoint in cx.checkpoints():
        if checkpoint.size == seq:
            return checkpoint.note
    return None


class _HttpLeader:
    """A leader served by ``cortexgraph serve-journal``."""

    def __init__(self, url: str, actor: str) -> None:
        self.url = url.rstrip("/")
        self.actor = actor

    def _get(self, path: str, **query: int) -> dict[str, Any]:
        address = f"{self.url}{path}"
        if query:
            address += "?" + urllib.parse.urlencode(query)
        try:
            with urllib.request.urlopen(address, timeout=_TIMEOUT_S) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and path == "/v1/checkpoint":
                return {}
            raise StorageError(f"the leader at {self.url} answered {exc.code} to {path}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise StorageError(f"cannot reach the leader at {self.url}: {exc}") from None
        try:
            value = decode(body, what=f"the leader's answer to {path}")
        except CortexError as exc:
            message = f"the leader sent a malformed answer to {path}: {exc}"
            raise VerificationError(message) from None
        if type(value) is not dict:
            raise VerificationError(f"the leader sent a malformed answer to {path}")
        return value

    def head(self) -> tuple[int, bytes]:
        value = self._get("/v1/head")
        seq, root, actor = value.get("seq"), value.get("root"), value.get("actor")
        if actor != self.actor:
            raise VerificationError(f"the leader serves actor {actor!r}, not {self.actor!r}")
        if type(seq) is not int or seq < 0 or type(root) is not bytes or len(root) != 32:
            raise VerificationError("the leader sent a malformed head")
        return seq, root

    def proof(self, old: int, new: int) -> ConsistencyProof:
        raw = self._get("/v1/proof", old=old, new=new).get("proof")
        if type(raw) is not bytes:
            raise VerificationError("the leader sent a malformed consistency proof")
        return ConsistencyProof.decode(raw)

    def entries(self, since: int, until: int) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        while since < until:
            page = self._get("/v1/entries", since=since, until=min(until, since + _PAGE))
            items = page.get("entries")
            if type(items) is not list or not items:
                raise VerificationError(f"the leader sent no entries after seq {since}")
            for item in items:
                if (
                    type(item) is not list
                    or len(item) != 2
                    or type(item[0]) is not int
                    or type(item[1]) is not bytes
                ):
                    raise VerificationError("the leader sent a malformed entry")
                out.append((item[0], item[1]))
            since = out[-1][0]
        return out

    def checkpoint(self, seq: int) -> str | None:
        note = self._get("/v1/checkpoint", seq=seq).get("note")
        return note if type(note) is str else None

    def close(self) -> None:
        pass


def _leader(source: str | Path, actor: str) -> _Leader:
    text = str(source)
    if text.startswith(("http://", "https://")):
        return _HttpLeader(text, actor)
    return _LocalLeader(Path(source), actor)


def sync(
    source: str | Path,
    destination: str | Path,
    actor: str,
    *,
    key: VerifierKey | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SyncReport:
    """Bring the follower store of ``actor`` under ``destination`` up to the leader's state
    (``source``: a store root or a ``serve-journal`` URL), after checking that the
    leader's journal extends the follower's (see the module doc). The follower is created
    if it does not exist.

    Raises:
        VerificationError: the leader forked, is truncated, sent a proof, an entry or a
            checkpoint that does not check out; the follower is unchanged.
        StorageError: the leader cannot be reached. ValidationError: bad arguments.
    """
    if key is not None and type(key) is not VerifierKey:
        raise ValidationError("must be a cortexgraph.VerifierKey", field="key")
    leader = _leader(source, actor)
    try:
        with open_store(destination, actor) as follower:
            before, mine = follower.seq, follower.overall_root()
            size, root = leader.head()
            if size < before:
                raise VerificationError(
                    f"the leader's journal has {size} entries and the follower's {before}:"
                    " the leader is truncated or another history; nothing was applied"
                )
            if size == before:
                if root != mine:
                    raise VerificationError(
                        f"the leader and the follower differ at seq {size}: a fork;"
                        " nothing was applied"
                    )
                return SyncReport(actor, before, before, 0, mine.hex())
            proof = leader.proof(before, size)
            if not verify_consistency(proof, old_root=mine, new_root=root):
                raise VerificationError(
                    f"the leader's state at seq {size} does not extend the follower's at seq"
                    f" {before} (a fork or a rewritten entry); nothing was applied"
                )
            if key is not None:
                _check_signed(leader.checkpoint(size), key, size, root)
            entries = leader.entries(before, size)
            appended = follower.append_entries(entries, expect_root=(size, root), progress=progress)
            return SyncReport(actor, before, follower.seq, appended, follower.overall_root().hex())
    finally:
        leader.close()


def _check_signed(note: str | None, key: VerifierKey, size: int, root: bytes) -> None:
    from .signing import verify_checkpoint

    if note is None:
        raise VerificationError(f"the leader has no checkpoint signed at seq {size}")
    checkpoint = verify_checkpoint(note, key)
    if checkpoint.size != size or checkpoint.root != root:
        raise VerificationError(f"the leader's signed checkpoint does not match seq {size}")


class JournalHandler(BaseHTTPRequestHandler):
    """Serves one store's journal, roots, proofs and checkpoints (see the module doc)."""

    cx: Cortex  # set on the class by make_server
    lock: threading.Lock

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the CLI reports start and stop

    def _send(self, status: int, value: Any) -> None:
        body = encode(value)
        self.send_response(status)
        self.send_header("Content-Type", "application/cbor")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def answer(self, path: str, query: dict[str, int]) -> tuple[int, Any]:
        """The status and value for a request (override to change answers in tests)."""
        cx = self.cx
        if path == "/v1/head":
            return 200, {"actor": cx.actor, "seq": cx.seq, "root": cx.overall_root()}
        if path == "/v1/proof":
            return 200, {"proof": cx.prove_consistency(query["old"], query["new"]).encode()}
        if path == "/v1/entries":
            entries = _entries_between(cx, query["since"], query["until"])
            return 200, {"entries": [[seq, data] for seq, data in entries]}
        if path == "/v1/checkpoint":
            note = _note_at(cx, query["seq"])
            return (404, {"error": "no checkpoint"}) if note is None else (200, {"note": note})
        return 404, {"error": f"unknown path {path}"}

    def do_GET(self) -> None:
        parsed = urllib.parse.urlsplit(self.path)
        try:
            query = {k: int(v, 10) for k, v in urllib.parse.parse_qsl(parsed.query)}
            with self.lock:
                status, value = self.answer(parsed.path, query)
        except (ValueError, KeyError, CortexError) as exc:
            status, value = 400, {"error": str(exc)}
        self._send(status, value)


def make_server(
    cx: Cortex,
    host: str = "127.0.0.1",
    port: int = 0,
    handler: type[JournalHandler] = JournalHandler,
) -> ThreadingHTTPServer:
    """An HTTP server (stdlib) serving ``cx``'s journal to followers; ``port`` 0 picks a
    free one (``server.server_address``). Call ``serve_forever()`` and, to stop,
    ``shutdown()``."""
    bound = type("BoundJournalHandler", (handler,), {"cx": cx, "lock": threading.Lock()})
    return ThreadingHTTPServer((host, port), bound)
