"""AgentRunner end to end with real child processes, scope_from_env, and the two CLI
commands (ingest-events, run-agent).

The child is ``tests/fixtures/agents/child_agent.py``: it verifies its scope from the
environment, calls a "tool" listing the scope's facts, prints a line that is not JSON and
finishes with a result built from the scope.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph.cli import main
from cortexgraph.integrations.agents import AgentRunner

HERE = Path(__file__).parent
CHILD = [sys.executable, str(HERE / "fixtures" / "agents" / "child_agent.py")]
SRC = str(HERE.parent / "src")
ENV = {"PYTHONPATH": SRC}
T0 = 1_700_000_000_000


@pytest.fixture
def cx(tmp_path: Path):
    with cg.open(tmp_path / "store", "parent", clock=cg.ManualClock(T0)) as handle:
        handle.write(cg.Fact(text="Deploys go through the CI pipeline", tags=["deploy"]))
        handle.write(cg.Fact(text="Releases are tagged on Fridays", tags=["deploy"]))
        handle.write(cg.Fact(text="The cache is SQLite in WAL mode", tags=["cache"]))
        yield handle


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_child_verifies_its_scope_and_its_results_land_linked_to_the_run(
    cx, tmp_path: Path
) -> None:
    """The child reads only the deploy facts it was scoped to (verified against the root,
    without the database); its tool call and result are stored linked to the run; its
    non-JSON line became an info event; the file was renamed when it finished."""
    runner = AgentRunner(cx, tmp_path / "events")
    result = runner.run(
        "helper", "How do we ship?", CHILD, where=cg.Q.tag("deploy"), recall=0, env=ENV
    )
    assert (result.returncode, result.error, result.scope_size) == (0, None, 2)
    assert result.result == (
        "How do we ship?: scope had Deploys go through the CI pipeline;"
        " Releases are tagged on Fridays"
    )
    assert result.path == tmp_path / "events" / "helper" / f"{T0}.jsonl"
    assert not list((tmp_path / "events" / "helper").glob("*_active.jsonl"))
    events = _lines(result.path)
    assert [e["event"] for e in events] == [
        "request",
        "start",
        "tool_start",
        "tool_end",
        "info",
        "finish",
    ]
    assert all(e["agent_id"] == str(T0) and e["ts"] == T0 for e in events)
    assert events[4]["message"] == "plain output from the agent"

    run = cx.resolve(result.run)
    assert run.memory.text == "How do we ship?" and "finished" in run.memory.tags
    linked = {
        (e.relation, cx.resolve(e.src).memory.type_name): cx.resolve(e.src).memory
        for e in cx.edges(result.run, direction="in")
    }
    assert linked[("derived_from", "fact")].text == result.result
    tool = linked[("relates_to", "event")]
    assert tool.kind == "tool_call" and "Releases are tagged on Fridays" in tool.text


def test_a_tampered_bundle_fails_the_child_with_verification_error(cx, tmp_path: Path) -> None:
    """A child given a bundle with one flipped byte reports VerificationError and exits 1."""
    blob = bytearray(cx.scope(cg.Q.tag("deploy"), limit=10))
    blob[len(blob) // 2] ^= 0x01
    path = tmp_path / "tampered.scope"
    path.write_bytes(bytes(blob))
    env = {
        **os.environ,
        **ENV,
        "CORTEXGRAPH_SCOPE": str(path),
        "CORTEXGRAPH_ROOT": cx.overall_root().hex(),
    }
    done = subprocess.run(
        CHILD, input='{"prompt": "x"}\n', capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 1
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["event"] == "error" and last["error"].startswith("VerificationError:")


def test_scope_from_env_checks_its_variables(cx, tmp_path: Path) -> None:
    """scope_from_env verifies a good bundle, and names the variable that is missing or
    malformed; an unreadable file is a StorageError and a foreign root a VerificationError."""
    path = tmp_path / "good.scope"
    path.write_bytes(cx.scope(cg.Q.tag("deploy"), limit=10))
    root = cx.overall_root().hex()
    view = cg.scope_from_env({"CORTEXGRAPH_SCOPE": str(path), "CORTEXGRAPH_ROOT": root})
    assert len(view.find(cg.Q.type(cg.Fact), limit=10).hits) == 2
    for env, field in [
        ({"CORTEXGRAPH_ROOT": root}, "CORTEXGRAPH_SCOPE"),
        ({"CORTEXGRAPH_SCOPE": str(path)}, "CORTEXGRAPH_ROOT"),
        ({"CORTEXGRAPH_SCOPE": str(path), "CORTEXGRAPH_ROOT": "zz" * 32}, "CORTEXGRAPH_ROOT"),
        ({"CORTEXGRAPH_SCOPE": str(path), "CORTEXGRAPH_ROOT": root[:-2]}, "CORTEXGRAPH_ROOT"),
    ]:
        with pytest.raises(cg.ValidationError) as caught:
            cg.scope_from_env(env)
        assert caught.value.field == field
    missing = {"CORTEXGRAPH_SCOPE": str(tmp_path / "none"), "CORTEXGRAPH_ROOT": root}
    with pytest.raises(cg.StorageError, match="cannot read the scope bundle"):
        cg.scope_from_env(missing)
    with pytest.raises(cg.VerificationError):
        cg.scope_from_env({"CORTEXGRAPH_SCOPE": str(path), "CORTEXGRAPH_ROOT": "00" * 32})


def test_scope_from_env_needs_no_store(tmp_path: Path) -> None:
    """The bundle file and the root are enough: with the store closed and deleted, the
    view still verifies and answers."""
    with cg.open(tmp_path / "store", "parent", clock=cg.ManualClock(T0)) as cx:
        cx.write(cg.Fact(text="Deploys go through the CI pipeline", tags=["deploy"]))
        (tmp_path / "b.scope").write_bytes(cx.scope(cg.Q.tag("deploy"), limit=5))
        root = cx.overall_root().hex()
    shutil.rmtree(tmp_path / "store")
    view = cg.scope_from_env(
        {"CORTEXGRAPH_SCOPE": str(tmp_path / "b.scope"), "CORTEXGRAPH_ROOT": root}
    )
    hits = view.find(cg.Q.tag("deploy"), limit=5).hits
    assert [h.record.memory.text for h in hits] == ["Deploys go through the CI pipeline"]


def test_a_child_that_dies_is_an_error_run(cx, tmp_path: Path) -> None:
    """A child that exits non-zero without finishing gets an error event with its status
    and standard error; the run is tagged failed and the error is linked to it."""
    command = [sys.executable, "-c", "import sys; print('half'); sys.exit('boom')"]
    result = AgentRunner(cx, tmp_path / "ev").run("crashy", "do it", command, recall=0)
    assert result.returncode == 1 and result.result is None
    assert result.error == "the agent exited with status 1 without finishing"
    last = _lines(result.path)[-1]
    assert last["event"] == "error" and "boom" in last["trace"]
    run = cx.resolve(result.run)
    assert {"failed", "error"} <= set(run.memory.tags)
    errors = [cx.resolve(e.src).memory for e in cx.edges(result.run, direction="in")]
    assert [m.kind for m in errors] == ["error"]


def test_a_child_past_its_timeout_is_killed_and_recorded_as_an_error(cx, tmp_path: Path) -> None:
    """A child that never ends is killed at ``timeout``, and the run ends with an error
    event carrying its (negative) exit status. (Whether its first line came out before
    the kill depends on how fast the machine starts Python, so it is not asserted.)"""
    command = [
        sys.executable,
        "-c",
        "import json, time; print(json.dumps({'event': 'start'}), flush=True); time.sleep(120)",
    ]
    result = AgentRunner(cx, tmp_path / "ev").run("stuck", "wait", command, recall=0, timeout=1)
    assert result.returncode < 0 and result.error is not None
    events = [e["event"] for e in _lines(result.path)]
    assert events in (["request", "start", "error"], ["request", "error"])
    assert "failed" in cx.resolve(result.run).memory.tags


def test_a_continuation_run_is_linked_to_its_session(cx, tmp_path: Path) -> None:
    """Two runs with the same session id: the second is derived_from the first."""
    runner = AgentRunner(cx, tmp_path / "ev", clock=cg.ManualClock(T0 + 5))
    first = runner.run("helper", "first", CHILD, recall=0, session_id="s-1", env=ENV)
    runner.clock = cg.ManualClock(T0 + 10)
    second = runner.run("helper", "second", CHILD, recall=0, session_id="s-1", env=ENV)
    assert [(e.relation, e.dst.id) for e in cx.edges(second.run)] == [
        ("derived_from", first.run.id)
    ]


def test_same_runs_give_the_same_journal_bytes(tmp_path: Path) -> None:
    """With a manual clock and a deterministic child, the same run journals the same bytes."""
    journals = []
    for name in ("one", "two"):
        with cg.open(tmp_path / name, "parent", clock=cg.ManualClock(T0)) as cx:
            cx.write(cg.Fact(text="Deploys go through the CI pipeline", tags=["deploy"]))
            AgentRunner(cx, tmp_path / name / "ev").run("helper", "How?", CHILD, env=ENV)
            journals.append(list(cx.journal_bytes()))
    assert journals[0] == journals[1]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": "../up"}, "name"),
        ({"name": ""}, "name"),
        ({"prompt": "  "}, "prompt"),
        ({"command": "python agent.py"}, "command"),
        ({"command": []}, "command"),
        ({"recall": -1}, "recall"),
        ({"scope_limit": 0}, "scope_limit"),
        ({"env": {"A": 1}}, "env"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(
    cx, tmp_path: Path, kwargs: dict, field: str
) -> None:
    """Each bad argument is a ValidationError naming it; no file is written, nothing journaled."""
    call = {"name": "helper", "prompt": "p", "command": CHILD, **kwargs}
    seq = cx.seq
    with pytest.raises(cg.ValidationError) as caught:
        AgentRunner(cx, tmp_path / "ev").run(call.pop("name"), call.pop("prompt"), **call)
    assert caught.value.field == field and cx.seq == seq
    assert not (tmp_path / "ev").exists()


def test_cli_ingest_events_and_run_agent(tmp_path: Path, capsys, monkeypatch) -> None:
    """``cortexgraph ingest-events`` reports what it recorded (nothing the second time) and
    ``cortexgraph run-agent`` runs the child after ``--`` with a scope of tagged memories."""
    store = ["--root", str(tmp_path / "s"), "--actor", "me", "--json"]
    fixtures = str(HERE / "fixtures" / "agents" / "events")
    assert main(["ingest-events", fixtures, *store]) == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["events"], len(first["garbage"]), len(first["runs"])) == (22, 4, 4)
    assert main(["ingest-events", fixtures, "--follow", "--interval", "0.01", *store]) == 0
    assert json.loads(capsys.readouterr().out)["lines"] == 0
    monkeypatch.setenv("PYTHONPATH", SRC)  # the child imports this checkout
    argv = ["run-agent", "--name", "cli", "--prompt", "Why?", "--tag", "agent-result", *store]
    assert main([*argv, "--recall", "0", "--", *CHILD]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert ran["scope"] == 3 and ran["result"].startswith("Why?: scope had ")
    assert Path(ran["path"]).parent == tmp_path / "s" / ".agent-events" / "me" / "cli"
    assert main([*argv, "--", sys.executable, "-c", "raise SystemExit(2)"]) == 1
    assert "without finishing" in json.loads(capsys.readouterr().out)["error"]


def test_cli_follow_tails_an_active_file_until_it_is_renamed(tmp_path: Path) -> None:
    """``cortexgraph ingest-events --follow`` in its own process: once it has recorded the
    request (seen through a read-only handle, polled with a deadline), the rest of the run
    is appended and the file renamed; the command then exits with all eight events."""
    source = HERE / "fixtures" / "agents" / "events" / "default" / "1700000000000.jsonl"
    raw = source.read_bytes().splitlines(keepends=True)
    folder = tmp_path / "ev" / "default"
    folder.mkdir(parents=True)
    active = folder / "1700000000000_active.jsonl"
    active.write_bytes(raw[0])
    command = [sys.executable, "-m", "cortexgraph.cli", "ingest-events", str(tmp_path / "ev")]
    command += ["--follow", "--interval", "0.02", "--timeout", "60", "--json"]
    command += ["--root", str(tmp_path / "s"), "--actor", "me"]
    env = {**os.environ, **ENV}
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as child:
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, "the follower never recorded the request"
            assert child.poll() is None, "the follower exited while the file was active"
            try:
                with cg.open(tmp_path / "s", "me", readonly=True, create=False) as cx:
                    if cx.find(cg.Q.tag("agent-run"), limit=1).hits:
                        break
            except cg.CortexError:  # the follower has not created the store yet
                continue
        with active.open("ab") as out:
            out.write(b"".join(raw[1:]))
        active.rename(folder / "1700000000000.jsonl")
        out_text, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    report = json.loads(out_text)
    assert (report["lines"], report["events"], len(report["runs"])) == (8, 8, 1)
