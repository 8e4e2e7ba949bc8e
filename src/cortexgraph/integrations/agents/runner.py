"""AgentRunner: run an agent command for a request, record its events, hand it a scope.

One :meth:`AgentRunner.run` call:

1. builds the child's **scope**: the memories matching ``where`` (a ``Q`` filter) and/or
   the ``recall`` hits of the prompt, as a proof-checked bundle (:meth:`Cortex.scope`)
   written to ``DIR/<name>/<ts>.scope``; the child gets its path in ``CORTEXGRAPH_SCOPE``
   and the store's OverallRoot (hex) in ``CORTEXGRAPH_ROOT``, and checks it with
   :func:`cortexgraph.scope_from_env` without the database;
2. writes the request line to ``DIR/<name>/<ts>_active.jsonl`` and sends the same line to
   the child's standard input (NDJSON input mode);
3. reads the child's standard output line by line: a JSON object with an ``event`` is an
   event (``ts`` and ``agent_id`` are added where missing), any other line becomes an
   ``info`` event with the line as its ``message``; each is appended to the file and
   ingested (:func:`~cortexgraph.integrations.agents.ingest_events`) as it arrives;
4. when the child exits without a ``finish`` or ``error`` event, appends an ``error`` with
   its exit code and the end of its standard error;
5. renames the file to ``DIR/<name>/<ts>.jsonl`` and ingests what is left.

Every time comes from the injected clock (the store's by default), so a run with a
manual clock and a deterministic child journals the same bytes each time.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs

import cortexgraph as cg

from .events import IngestReport, ingest_events

if TYPE_CHECKING:
    from ...core.predicates import Predicate

__all__ = ["AgentRunner", "RunResult"]

_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_STDERR_TAIL = 4000


@attrs.frozen
class RunResult:
    """What one agent run did.

    Attributes:
        agent_id: the run's id (its request ``ts``), also the file name's stem.
        path: the finished event file.
        run: the run memory in the store.
        returncode: the child's exit status.
        result: the ``finish`` result (as text), or None.
        error: the first ``error`` message, or None.
        events: the events the file holds (request included).
        scope_size: memories in the scope handed to the child.
        ingest: the ingestion reports merged.
    """

    agent_id: str
    path: Path
    run: cg.MemoryURI | None
    returncode: int
    result: str | None
    error: str | None
    events: int
    scope_size: int
    ingest: IngestReport


class AgentRunner:
    """Runs agent commands for requests, recording their events into a store.

    Args:
        cx: a writable handle; the runs, tool calls and results land in it.
        directory: where the event files go (``<directory>/<name>/<ts>[_active].jsonl``).
        clock: supplies ``ts`` (default: the store's clock).
        ns: the namespace of runs without a ``facet``.
    """

    def __init__(
        self,
        cx: cg.Cortex,
        directory: str | Path,
        *,
        clock: cg.Clock | None = None,
        ns: str = "default",
    ) -> None:
        if cx.readonly:
            raise cg.ReadOnlyError("an AgentRunner records runs; open the store read-write")
        if clock is not None and not isinstance(clock, cg.Clock):
            raise cg.ValidationError("must have a now_ms() method", field="clock")
        self.cx = cx
        self.directory = Path(directory)
        self.clock: cg.Clock = clock if clock is not None else cx.clock
        self.ns = ns

    def run(
        self,
        name: str,
        prompt: str,
        command: Sequence[str],
        *,
        where: Predicate | None = None,
        recall: int = 10,
        scope_limit: int = 50,
        provider: str | None = None,
        facet: str | None = None,
        session_id: str | None = None,
        chat_id: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> RunResult:
        """Run ``command`` as the agent ``name`` for ``prompt``; see the module doc.

        Args:
            name: the agent's name (the event file's directory): letters, digits, ``._-``.
            prompt: the request's prompt.
            command: the program and its arguments.
            where: a ``Q`` filter whose best ``scope_limit`` memories go into the scope.
            recall: how many recall hits of the prompt go into the scope (0: none).
            scope_limit: the most memories from ``where``.
            provider, facet, session_id, chat_id: request fields (see the file format).
            env: extra environment variables for the child.
            timeout: seconds before the child is killed (it then gets an ``error`` event).

        Returns:
            A :class:`RunResult`.

        Raises:
            ValidationError: a bad argument (``field`` names it).
            StorageError: the event directory cannot be written.
        """
        self._check(name, prompt, command, recall, scope_limit, env)
        folder = self.directory / name
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise cg.StorageError(f"cannot create {str(folder)!r}: {error}") from None
        ts = self.clock.now_ms()
        while (folder / f"{ts}_active.jsonl").exists() or (folder / f"{ts}.jsonl").exists():
            ts += 1  # two runs of one agent in the same millisecond
        agent_id = str(ts)
        active = folder / f"{ts}_active.jsonl"
        scope_path = folder / f"{ts}.scope"
        scope_size = self._write_scope(scope_path, prompt, where, recall, scope_limit)
        root = self.cx.overall_root().hex()  # the root the bundle commits to
        request: dict[str, Any] = {"event": "request", "ts": ts, "agent_id": agent_id}
        fields = {
            "prompt": prompt,
            "name": name,
            "provider": provider,
            "facet": facet,
            "session_id": session_id,
            "chat_id": chat_id,
        }
        request.update({key: value for key, value in fields.items() if value is not None})
        line = _dumps(request)
        reports: list[IngestReport] = []
        state = _RunState()
        with active.open("a", encoding="utf-8") as out:
            self._append(out, line, state)
            reports.append(ingest_events(self.cx, active, ns=self.ns))
            child_env = dict(os.environ)
            child_env.update(env or {})
            child_env["CORTEXGRAPH_SCOPE"] = str(scope_path)
            child_env["CORTEXGRAPH_ROOT"] = root
            returncode, stderr = self._spawn(
                command, line, child_env, out, agent_id, state, reports, active, timeout
            )
            if not state.ended:
                tail = stderr[-_STDERR_TAIL:]
                failure = {
                    "event": "error",
                    "ts": self.clock.now_ms(),
                    "agent_id": agent_id,
                    "error": f"the agent exited with status {returncode} without finishing",
                }
                if tail:
                    failure["trace"] = tail
                self._append(out, _dumps(failure), state, failure)
        final = folder / f"{ts}.jsonl"
        active.rename(final)
        reports.append(ingest_events(self.cx, final, ns=self.ns))
        merged = attrs.evolve(IngestReport.merge(reports), files=1)  # one file, many calls
        runs = merged.runs
        return RunResult(
            agent_id=agent_id,
            path=final,
            run=runs[0] if runs else None,
            returncode=returncode,
            result=state.result,
            error=state.error,
            events=state.events,
            scope_size=scope_size,
            ingest=merged,
        )

    def _check(
        self,
        name: object,
        prompt: object,
        command: object,
        recall: object,
        scope_limit: object,
        env: object,
    ) -> None:
        if (
            type(name) is not str
            or not name
            or len(name) > 64
            or not set(name) <= _NAME_OK
            or name.startswith(".")
        ):
            raise cg.ValidationError(
                f"{name!r} is not an agent name (1-64 of letters, digits, '._-')", field="name"
            )
        if type(prompt) is not str or not prompt.strip():
            raise cg.ValidationError("must be a non-empty string", field="prompt")
        if (
            isinstance(command, (str, bytes))
            or not isinstance(command, Sequence)
            or not command
            or not all(type(part) is str for part in command)
        ):
            raise cg.ValidationError("must be a non-empty list of strings", field="command")
        if type(recall) is not int or not 0 <= recall <= 1000:
            raise cg.ValidationError("must be an int from 0 to 1000", field="recall")
        if type(scope_limit) is not int or not 1 <= scope_limit <= 10_000:
            raise cg.ValidationError("must be an int from 1 to 10,000", field="scope_limit")
        if env is not None and (
            not isinstance(env, Mapping)
            or not all(type(k) is str and type(v) is str for k, v in env.items())
        ):
            raise cg.ValidationError("must map strings to strings", field="env")

    def _write_scope(self, path: Path, prompt: str, where: Any, recall: int, limit: int) -> int:
        """Write the child's scope bundle; returns how many memories it holds."""
        uris: dict[bytes, cg.MemoryURI] = {}
        if where is not None:
            for hit in self.cx.find(where, limit=limit).hits:
                uris.setdefault(hit.uri.id, hit.uri)
        if recall:
            for recalled in self.cx.recall(prompt, k=recall).hits:
                uris.setdefault(recalled.uri.id, recalled.uri)
        blob = self.cx.scope(list(uris.values()), limit=max(1, len(uris)))
        try:
            path.write_bytes(blob)
        except OSError as error:
            raise cg.StorageError(f"cannot write the scope bundle {str(path)!r}: {error}") from None
        return len(uris)

    def _append(
        self, out: IO[str], line: str, state: _RunState, event: dict[str, Any] | None = None
    ) -> None:
        out.write(line + "\n")
        out.flush()
        state.events += 1
        if event is None:
            return
        kind = event.get("event")
        if kind == "finish":
            state.ended = True
            result = event.get("result")
            if result is not None and state.result is None:
                text = result if isinstance(result, str) else json.dumps(result, sort_keys=True)
                state.result = text
        elif kind == "error":
            state.ended = True
            if state.error is None:
                state.error = str(event.get("error"))

    def _event(self, raw: bytes, agent_id: str) -> dict[str, Any]:
        """The event of one stdout line: the child's JSON, or an ``info`` wrapping the text."""
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("event"), str):
            data = {"event": "info", "message": text}
        if type(data.get("ts")) is not int:
            data["ts"] = self.clock.now_ms()
        data["agent_id"] = agent_id
        return data

    def _spawn(
        self,
        command: Sequence[str],
        request: str,
        env: dict[str, str],
        out: IO[str],
        agent_id: str,
        state: _RunState,
        reports: list[IngestReport],
        active: Path,
        timeout: float | None,
    ) -> tuple[int, str]:
        try:
            child = subprocess.Popen(
                list(command),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
        except OSError as error:
            return 127, f"cannot start {command[0]!r}: {error}"
        with child:  # closes the pipes and reaps the child however this ends
            assert child.stdin is not None and child.stdout is not None
            errors: list[bytes] = []
            stderr = child.stderr
            assert stderr is not None
            reader = threading.Thread(target=lambda: errors.append(stderr.read()), daemon=True)
            reader.start()
            timer = None
            if timeout is not None:
                timer = threading.Timer(timeout, child.kill)
                timer.start()
            try:
                try:
                    child.stdin.write(request.encode("utf-8") + b"\n")
                    child.stdin.close()
                except BrokenPipeError:  # the child does not read its input
                    pass
                for raw in child.stdout:
                    if not raw.strip():
                        continue
                    event = self._event(raw, agent_id)
                    self._append(out, _dumps(event), state, event)
                    reports.append(ingest_events(self.cx, active, ns=self.ns))
                returncode = child.wait()
            finally:
                if timer is not None:
                    timer.cancel()
                if child.poll() is None:
                    child.kill()
                    child.wait()
            reader.join()
        return returncode, b"".join(errors).decode("utf-8", "replace")


def _dumps(event: dict[str, Any]) -> str:
    """One event as one line of JSON (compact, non-ASCII kept as is)."""
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))


@attrs.define
class _RunState:
    events: int = 0
    ended: bool = False
    result: str | None = None
    error: str | None = None
