"""A helper process that embeds part of a large catch-up on the machine's second CPU.

A first vector recall after many batched writes embeds every memory: 100,000 texts take
about a second of :class:`~cortexgraph.embed.HashEmbedder` time on one CPU, most of that
recall. Threads do not help (the embedder holds the GIL for much of its work), and a
forked copy of this process would pay for every page either process then writes. So a
catch-up that will embed at least :data:`WORKER_MIN` texts with an embedder that declares
``worker_safe`` (``embed.base``) starts a fresh Python process, :class:`EmbedWorker`, when
it begins reading the texts, and hands it the first texts read while it reads the rest::

    this process                                the worker (python -c, started at once)
    reads texts, a chunk at a time; sends the   reads the messages on its stdin (a thread,
    first of them as messages on the worker's   so this process never waits on a full
    stdin: an 8-byte length, then a pickle      pipe): the sys.path, the pickled embedder,
    (its sys.path; the embedder; each chunk's   then chunks of texts, which it embeds in
    texts, up to the worker's capacity)         order into a shared file mapped by both
                                                (float32 rows: memfd on Linux), writing
    embeds the other texts itself, then the     after each EMBED_BATCH the count of rows
    worker's last rows, from the end, until     done (8 bytes) to its stdout; exits at
    it meets the rows the worker reported;      the end of its stdin (or is killed once
    copies those out of the shared file         this process has every row)

Invariants:

- P1 A row from the worker is the embedder's row of that text, byte for byte: each
  vector is a pure function of its text (the embedder's promise; checked by the tests
  against embedding in process), so answers never depend on timing or on the worker.
- P2 The worker only embeds: it opens no store, and nothing it does can change one.
- P3 A worker that cannot start, fails or hangs costs time, never rows: this process
  embeds the worker's share from its end while waiting for it, so whatever the worker did
  not report done is embedded here (and an embedder's error surfaces as it would without
  a worker); a worker that stops reading its stdin for :data:`WORKER_STALL` seconds is
  given up. The worker is always killed if still running, and reaped, by
  :meth:`EmbedWorker.end`.
"""

from __future__ import annotations

import collections
import contextlib
import mmap
import os
import pickle
import queue
import select
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
import numpy.typing as npt

from ..embed import Embedder
from ..embed.base import embed_checked, worker_safe

__all__ = [
    "EMBED_BATCH",
    "WORKER_MIN",
    "WORKER_SHARE",
    "WORKER_STALL",
    "EmbedWorker",
    "serve",
    "worker_capacity",
]

#: texts given to the embedder per call (its own chunking aside)
EMBED_BATCH = 256
#: the fewest texts worth a worker: its start (0.12 s of the other CPU, importing numpy)
#: and the two processes' contention for memory cost more than its rows save below about
#: 15,000 (on two quiet CPUs, first catch-up: 10,000 texts 0.21 s against 0.18 s alone;
#: 20,000 0.32 against 0.38; 40,000 0.56 against 0.78; 100,000 1.3 against 2.0)
WORKER_MIN = 16_384
#: the share of a catch-up's texts sent to the worker: more than half, as this process
#: reads every text (about 4.5 µs each, the worker embedding from the first chunk on)
#: and embeds the rest (about 10 µs each); it then embeds the worker's share from its end
#: until the two meet, so a share on the high side costs nothing (at 100,000 texts on two
#: quiet CPUs the worker embedded about 70 % of them)
WORKER_SHARE = 0.8
#: seconds the worker's stdin may stay full before the worker counts as stuck (its reader
#: thread drains it as soon as the worker runs, about 0.1 s after it starts)
WORKER_STALL = 30.0

_LEN = 8  # bytes of a message's length, and of a report
_PIPE_SIZE = 1 << 20  # the most an unprivileged process may ask for, by default
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from cortexgraph.vector.parallel import serve; serve()"
)

#: glibc's allocator, told to keep what the embedder frees for its next batch: by default
#: a fresh process gives the memory of its temporary arrays back to the system after each
#: batch and faults it in again for the next (440,000 page faults for 68,000 texts, which
#: doubled the worker's time); other allocators ignore these
_MALLOC = {"MALLOC_TRIM_THRESHOLD_": str(1 << 30), "MALLOC_MMAP_THRESHOLD_": str(1 << 28)}

#: ``progress(done)``: the rows the worker reported done so far
Report = Callable[[int], None]


def _cpus() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - platforms without affinity


def worker_capacity(embedder: Embedder, texts: int) -> int:
    """How many of ``texts`` texts a worker should embed: 0 (no worker) unless there are
    at least :data:`WORKER_MIN`, the embedder is worker-safe, the platform is POSIX and
    this process may run on two CPUs or more; else :data:`WORKER_SHARE` of them."""
    if texts < WORKER_MIN or os.name != "posix" or not worker_safe(embedder) or _cpus() < 2:
        return 0
    return int(texts * WORKER_SHARE)


def _shared_file(size: int) -> int:
    """A file descriptor of ``size`` bytes of memory that another process can map."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("cortexgraph-vectors")
    else:  # pragma: no cover - POSIX without memfd: an unlinked temporary file
        fd, name = tempfile.mkstemp(prefix="cortexgraph-vectors-")
        os.unlink(name)
    try:
        os.ftruncate(fd, size)
    except OSError:
        os.close(fd)
        raise
    return fd


def _message(value: object) -> bytes:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return len(data).to_bytes(_LEN, "little") + data


class EmbedWorker:
    """A helper process embedding, in order, the texts :meth:`send` gives it, up to
    ``capacity`` rows of ``dim`` float32 (see the module docstring).

    Build one with :meth:`start`; always call :meth:`end` (a ``with`` block does).
    """

    def __init__(self, proc: subprocess.Popen[bytes], fd: int, capacity: int, dim: int) -> None:
        self._proc = proc
        self._fd = fd
        self.capacity = capacity
        self.dim = dim
        self.sent = 0  # texts sent
        self.done = 0  # rows the worker reported done
        self.failed = False  # stopped: it owes nothing more
        self._pending = b""
        self._outbox: collections.deque[bytes] = collections.deque()  # for its stdin
        # both pipes exist: Popen(stdin=PIPE, stdout=PIPE)
        self._in = cast("IO[bytes]", proc.stdin).fileno()
        self._out = cast("IO[bytes]", proc.stdout).fileno()
        os.set_blocking(self._in, False)
        import fcntl  # here, not above: POSIX only, as the worker

        if hasattr(fcntl, "F_SETPIPE_SZ"):  # Linux: room for a whole chunk of texts
            with contextlib.suppress(OSError):  # a limit below 1 MiB: the default stays
                fcntl.fcntl(self._in, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)

    @classmethod
    def start(cls, embedder: Embedder, capacity: int) -> EmbedWorker | None:
        """A worker for up to ``capacity`` texts, or None when one cannot start (no
        interpreter to run, the embedder does not pickle, no shared memory)."""
        if capacity <= 0 or not sys.executable:
            return None
        try:
            setup = _message(list(sys.path)) + _message(embedder)
        except (pickle.PicklingError, TypeError, AttributeError):
            return None
        root = str(Path(__file__).resolve().parents[2])  # the directory of the package
        fd = -1
        try:
            fd = _shared_file(capacity * embedder.dim * 4)
            args = [sys.executable, "-c", _BOOT, root, str(fd), str(capacity), str(embedder.dim)]
            proc = subprocess.Popen(  # this interpreter, arguments of ours
                args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                pass_fds=(fd,),
                env={**os.environ, **_MALLOC},
            )
        except OSError:
            if fd >= 0:
                os.close(fd)
            return None
        worker = cls(proc, fd, capacity, embedder.dim)
        worker._outbox.append(setup)
        return worker

    def __enter__(self) -> EmbedWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()

    def send(self, texts: list[str]) -> int:
        """Give the worker the first of ``texts`` it has room for; how many it took.

        What its stdin has no room for yet waits in this process (the worker starts in
        about 0.1 s, reading nothing meanwhile) and goes at the next :meth:`send` or at
        :meth:`flush`: the sender never waits here."""
        room = self.capacity - self.sent
        if self.failed or room <= 0 or not texts:
            return 0
        taken = texts[:room]
        self._outbox.append(_message(taken))
        self._write(wait=False)
        self.sent += len(taken)
        return len(taken)

    def flush(self) -> None:
        """Wait until the worker's stdin holds every text sent (the worker fails if it
        reads nothing for :data:`WORKER_STALL` seconds)."""
        self._write(wait=True)

    def _write(self, *, wait: bool) -> None:
        """Write what waits for the worker's stdin, as far as it has room (all of it with
        ``wait``: waiting for room at most :data:`WORKER_STALL` seconds at a time)."""
        outbox = self._outbox
        while outbox and not self.failed:
            try:
                written = os.write(self._in, outbox[0])
            except BlockingIOError:
                if not wait:
                    return
                if not select.select([], [self._in], [], WORKER_STALL)[1]:
                    self._stop()  # it stopped reading
            except OSError:  # its stdin closed: it ended
                self._stop()
            else:
                if written == len(outbox[0]):
                    outbox.popleft()
                else:
                    outbox[0] = outbox[0][written:]

    def poll(self, timeout: float = 0.0) -> int:
        """Read the worker's reports that arrive within ``timeout`` seconds; the rows done."""
        self._read(timeout)
        return self.done

    def _read(self, timeout: float) -> bool:
        """Read what the worker reported, waiting up to ``timeout`` seconds for
        something; whether anything came (reports, or the end of its output)."""
        if self.failed or not select.select([self._out], [], [], timeout)[0]:
            return False
        data = os.read(self._out, 4096 * _LEN)
        if not data:
            self._stop()  # it ended: whatever it did not report is not done
            return True
        data = self._pending + data
        whole = len(data) - len(data) % _LEN
        if whole:
            self.done = min(int.from_bytes(data[whole - _LEN : whole], "little"), self.sent)
        self._pending = data[whole:]
        return True

    def collect(
        self,
        out: npt.NDArray[np.float32],
        embed_here: Callable[[int, int], None],
        report: Report | None = None,
    ) -> int:
        """Fill ``out`` (a float32 array with a row for each text sent) and end the
        worker: while it has not reported every row, this process embeds the last rows
        it still owes, :data:`EMBED_BATCH` at a time from the end, with
        ``embed_here(start, stop)`` (which fills ``out[start:stop]``); the rows below are
        copied from the worker once it reports them. So the two meet where their speeds
        put them, and a worker that died or hangs costs nothing but its share's time
        here (P3). ``report(done)`` follows the worker's reports.

        Returns:
            How many of the first rows came from the worker.
        """
        try:
            self.flush()
            self._close_input()  # the end of its input: it exits when done
            top = self.sent  # out[top:] is embedded here
            while self.done < top:
                if self._read(0.0) and report is not None:
                    report(self.done)
                if self.done >= top:
                    break
                low = max(self.done, top - EMBED_BATCH)
                embed_here(low, top)
                top = low
            if top:
                shared = mmap.mmap(self._fd, self.capacity * self.dim * 4)
                try:  # (a mapping closes only once no array views it: none is kept)
                    rows = np.frombuffer(shared, dtype=np.float32, count=top * self.dim)
                    out[:top] = rows.reshape(top, self.dim)
                    del rows
                finally:
                    shared.close()
            return top
        finally:
            self.end()

    def _close_input(self) -> None:
        stdin = self._proc.stdin
        if stdin is not None and not stdin.closed:
            with contextlib.suppress(OSError):  # a worker that ended: a broken pipe
                stdin.close()

    def _stop(self) -> None:
        self.failed = True
        if self._proc.poll() is None:
            self._proc.kill()

    def end(self) -> None:
        """Stop the worker if it still runs, reap it and free its memory (idempotent)."""
        proc = self._proc
        if proc.poll() is None:  # what it still does (rows embedded here) is not needed
            proc.kill()
        self._close_input()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _read_message(stream: IO[bytes]) -> Any:
    """The next message on ``stream``, or None at its end."""
    head = stream.read(_LEN)
    if len(head) < _LEN:
        return None
    size = int.from_bytes(head, "little")
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)  # written by the process that started this one


def serve() -> None:  # pragma: no cover - runs in the worker process
    """The worker's main: ``argv``: the package's directory, the shared file's
    descriptor, its capacity in rows and the dimension."""
    fd, capacity, dim = (int(arg) for arg in sys.argv[2:5])
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.path[:0] = _read_message(stdin)
    embedder = _read_message(stdin)
    chunks: queue.Queue[list[str] | None] = queue.Queue()

    def take_input() -> None:  # drained at once, so the sender never waits on the pipe
        while (chunk := _read_message(stdin)) is not None:
            chunks.put(chunk)
        chunks.put(None)

    threading.Thread(target=take_input, daemon=True).start()
    with mmap.mmap(fd, capacity * dim * 4) as shared:
        rows = np.frombuffer(shared, dtype=np.float32).reshape(capacity, dim)
        done = 0
        while (texts := chunks.get()) is not None:
            for start in range(0, len(texts), EMBED_BATCH):
                batch = texts[start : start + EMBED_BATCH]
                rows[done : done + len(batch)] = embed_checked(embedder, batch)
                done += len(batch)
                stdout.write(done.to_bytes(_LEN, "little"))
                stdout.flush()
        del rows
