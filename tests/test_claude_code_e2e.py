"""The Claude Code plugin end to end, as Claude Code drives it, over a recorded session.

Each hook runs as Claude Code runs it: ``cortexgraph hook <Event>`` in a fresh process with
the event's JSON on stdin, in a temporary git repository, with ``CORTEXGRAPH_HOME`` in a
temporary directory. The transcripts are the recorded sessions in
``fixtures/claude_code/`` (written by ``make_session.py`` there); ``expected.json`` lists,
by hand, the memories each session establishes with their category and type, a
paraphrased question about each, and the statements (in tool results, a sub-agent's
sidechain, meta and system lines) that must never become memories.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cortexgraph as cg
from cortexgraph.integrations.claude_code.categories import CATEGORIES
from cortexgraph.integrations.claude_code.stores import project_store

FIXTURES = Path(__file__).parent / "fixtures" / "claude_code"
TRANSCRIPTS = {
    "proration": FIXTURES / "session-proration.jsonl",
    "refunds": FIXTURES / "session-refunds.jsonl",
}
EXPECTED = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
MEMORIES: list[dict[str, str]] = EXPECTED["memories"]
NOT_MEMORIES: list[str] = EXPECTED["not_memories"]
START_MARK = "<!-- CORTEX_MEMORY_START -->"
END_MARK = "<!-- CORTEX_MEMORY_END -->"
SURFACE_FILE = Path(".claude") / "cortex-memory.local.md"
#: every type a statement can become (all but the file and command references)
STATEMENT_TYPES = ("fact", "constraint", "event", "pattern", "preference", "goal")
SRC = str(Path(cg.__file__).parent.parent)


def session_id(name: str) -> str:
    """The session id Claude Code recorded in the transcript ``name``."""
    with TRANSCRIPTS[name].open(encoding="utf-8") as lines:
        return str(next(json.loads(line)["sessionId"] for line in lines if '"sessionId"' in line))


def expected(*sessions: str) -> list[dict[str, str]]:
    return [m for m in MEMORIES if m["session"] in sessions]


def flat(text: str) -> str:
    """``text`` with its whitespace runs made single spaces (a surface line is one line)."""
    return " ".join(text.split())


class Project:
    """A temporary git repository on a feature branch, and where the hooks keep things."""

    def __init__(self, repo: Path, home: Path) -> None:
        self.repo = repo
        self.home = home
        self.store = project_store(repo)

    def payload(self, event: str, session: str = "live", **fields: Any) -> dict[str, Any]:
        """The JSON Claude Code sends for ``event`` (the per-event field in ``fields``)."""
        return {
            "session_id": session,
            "transcript_path": fields.pop("transcript_path", str(self.repo / "live.jsonl")),
            "cwd": str(self.repo),
            "hook_event_name": event,
            **fields,
        }

    def hook(
        self,
        event: str,
        stdin: dict[str, Any] | str,
        *,
        command_prefix: tuple[str, ...] = (),
        **run: Any,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``cortexgraph hook <event>`` as Claude Code does: a new process, JSON on stdin."""
        return subprocess.run(
            [*command_prefix, sys.executable, "-m", "cortexgraph.cli", "hook", event],
            input=stdin if isinstance(stdin, str) else json.dumps(stdin),
            capture_output=True,
            text=True,
            cwd=self.repo,
            timeout=120,
            env={**os.environ, "PYTHONPATH": SRC, "CORTEXGRAPH_HOME": str(self.home)},
            check=False,
            **run,
        )

    def stop(self, name: str, event: str = "Stop") -> subprocess.CompletedProcess[str]:
        """The extraction hook ``event`` over the recorded session ``name``."""
        fields = {"reason": "exit"} if event == "SessionEnd" else {}
        transcript = str(TRANSCRIPTS[name])
        return self.hook(
            event, self.payload(event, session_id(name), transcript_path=transcript, **fields)
        )

    def session_start(self, source: str = "startup") -> subprocess.CompletedProcess[str]:
        return self.hook("SessionStart", self.payload("SessionStart", source=source))

    def ask(self, prompt: str) -> subprocess.CompletedProcess[str]:
        return self.hook("UserPromptSubmit", self.payload("UserPromptSubmit", prompt=prompt))

    def log(self) -> list[str]:
        log = self.store.root / "cortex.log"
        return log.read_text(encoding="utf-8").splitlines() if log.exists() else []

    def state(self) -> tuple[int, bytes | None]:
        """The project store's journal seq and overall root."""
        with cg.open(self.store.root, self.store.actor, readonly=True) as cx:
            stats = cx.stats()
        return stats.seq, stats.overall_root

    def statements(self) -> dict[str, list[cg.Record]]:
        """The active memories the session's prose became (not the extraction cursors nor
        the file and command references), by their text, each resolved in the store."""
        with cg.open(self.store.root, self.store.actor, readonly=True) as cx:
            kinds = cg.Q.any_of(*(cg.Q.type(name) for name in STATEMENT_TYPES))
            found = cx.find(kinds & ~cg.Q.ns("extraction"), limit=10_000)
            out: dict[str, list[cg.Record]] = {}
            for hit in found:
                record = cx.resolve(hit.uri)
                out.setdefault(record.memory.text, []).append(record)
        return out


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A git repository with a commit on main and the feature branch checked out."""
    repo = tmp_path / "ledgerline"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=repo, check=True)
    (repo / "README.md").write_text("# ledgerline\n")
    subprocess.run([*git, "add", "README.md"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "Initial import"], cwd=repo, check=True)
    subprocess.run([*git, "checkout", "-q", "-b", "feature/proration"], cwd=repo, check=True)
    home = tmp_path / "home"
    home.mkdir()
    return Project(repo, home)


def context(done: subprocess.CompletedProcess[str], event: str) -> str:
    """The additionalContext a hook printed (after checking the hook's output shape)."""
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)["hookSpecificOutput"]
    assert output["hookEventName"] == event
    text = output["additionalContext"]
    assert isinstance(text, str)
    return text


def split_surface_file(text: str) -> tuple[str, str, str]:
    """The surface file as (before the block, the block, after it); asserts it is whole:
    one start marker, then one end marker."""
    assert text.count(START_MARK) == 1, text
    assert text.count(END_MARK) == 1, text
    start, end = text.index(START_MARK), text.index(END_MARK)
    assert start < end, text
    return text[:start], text[start + len(START_MARK) : end], text[end + len(END_MARK) :]


def check_surface(surface: str, memories: list[dict[str, str]]) -> list[dict[str, str]]:
    """Checks the surface's size and budgets; returns the ``memories`` it carries."""
    tokens = cg.estimate_tokens(surface)
    assert 300 <= tokens <= 500, (tokens, surface)
    carried = [m for m in memories if flat(m["text"]) in flat(surface)]
    per_category = Counter(m["category"] for m in carried)
    for category, lines in per_category.items():
        assert lines <= CATEGORIES[category].budget, (category, lines)
    for text in NOT_MEMORIES:
        assert flat(text) not in flat(surface)
    return carried


def test_the_fixture_is_a_realistic_recorded_session() -> None:
    """The recorded session has the size and the shapes of a real one: over 200 lines,
    user/assistant/system/summary lines with the fields Claude Code writes, content as a
    string and as text, tool_use and tool_result blocks (some outputs long), sidechain
    and meta lines; and regenerating it from its script gives the same bytes."""
    lines = [json.loads(line) for line in TRANSCRIPTS["proration"].read_text().splitlines()]
    assert len(lines) >= 200
    assert {line["type"] for line in lines} == {"summary", "user", "assistant", "system"}
    blocks = Counter(
        block["type"]
        for line in lines
        if isinstance(line.get("message", {}).get("content"), list)
        for block in line["message"]["content"]
    )
    assert blocks["text"] > 20 and blocks["tool_use"] > 50 and blocks["tool_result"] > 50
    assert any(isinstance(line.get("message", {}).get("content"), str) for line in lines)
    results = [
        block["content"]
        for line in lines
        if isinstance(line.get("message", {}).get("content"), list)
        for block in line["message"]["content"]
        if block["type"] == "tool_result"
    ]
    assert max(len(json.dumps(result)) for result in results) > 1500
    assert any(line.get("isSidechain") for line in lines)
    assert any(line.get("isMeta") for line in lines)
    for line in lines:
        if line["type"] != "summary":
            for field in ("uuid", "parentUuid", "timestamp", "sessionId", "cwd", "gitBranch"):
                assert field in line, (field, line)
    assert len(expected("proration")) >= 20
    assert {m["category"] for m in MEMORIES} == {
        "decision",
        "rule",
        "gotcha",
        "progress",
        "pattern",
        "architecture",
        "preference",
    }

    with tempfile.TemporaryDirectory() as out:
        copy = Path(out) / "make_session.py"
        shutil.copy(FIXTURES / "make_session.py", copy)
        subprocess.run([sys.executable, str(copy)], check=True, timeout=60)
        for name in ("session-proration.jsonl", "session-refunds.jsonl", "expected.json"):
            assert (Path(out) / name).read_bytes() == (FIXTURES / name).read_bytes(), name


def test_a_recorded_session_is_learned_surfaced_and_recalled(project: Project) -> None:
    """The whole cycle over the recorded session: on an empty project SessionStart and a
    prompt print nothing; Stop learns every memory the session established, with its
    type and category; SessionEnd over the same transcript writes nothing more; the next
    SessionStart prints a surface of 300-500 tokens within the category budgets that
    carries every one of them, and writes the same block into the surface file, keeping
    the user's own lines; a paraphrased question about a memory already on the surface
    does not inject it a second time."""
    for done in (project.session_start(), project.ask("how do we prorate invoices")):
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert not (project.store.root / project.store.actor).exists()  # reading creates none

    notes = project.repo / SURFACE_FILE
    notes.parent.mkdir()
    notes.write_text("# My notes\nkeep me\n", encoding="utf-8")
    done = project.stop("proration")
    assert (done.returncode, done.stdout, project.log()) == (0, "", [])

    learned = project.statements()
    for memory in expected("proration"):
        assert memory["text"] in learned, memory["text"]
        (record,) = learned[memory["text"]]  # once
        assert record.memory.type_name == memory["type"], memory
        assert memory["category"] in record.memory.tags, (memory, record.memory.tags)
        assert record.memory.source is not None
        assert record.memory.source.branch == "feature/proration"  # the git context
    before = project.state()

    done = project.stop("proration", "SessionEnd")
    assert (done.returncode, done.stdout, project.log()) == (0, "", [])
    assert project.state() == before  # the cursor: nothing new from the same transcript

    start = project.session_start()
    surface = context(start, "SessionStart")
    carried = check_surface(surface, expected("proration"))
    assert [m["text"] for m in carried] == [m["text"] for m in expected("proration")]
    head, block, tail = split_surface_file(notes.read_text(encoding="utf-8"))
    assert head.startswith("# My notes\nkeep me\n")
    assert block.strip() == surface.strip()
    assert tail.strip() == ""
    assert project.session_start("resume").stdout == start.stdout  # same store, same bytes

    on_surface = next(m for m in carried if m["category"] == "gotcha")
    asked = project.ask(on_surface["question"])
    assert asked.returncode == 0
    if asked.stdout:
        assert flat(on_surface["text"]) not in flat(context(asked, "UserPromptSubmit"))
    assert project.log() == []


def test_nothing_is_learned_from_tool_results_sidechains_meta_or_system_lines(
    project: Project,
) -> None:
    """Stop over the recorded session learns exactly the statements the user and the
    assistant made in the main conversation: nothing from tool results (file contents, a
    README, git log output, a sub-agent's report), from the sub-agent's own sidechain
    conversation, from the meta caveat Claude Code records before local commands, or from
    system lines."""
    done = project.stop("proration")
    assert (done.returncode, project.log()) == (0, [])
    learned = project.statements()
    leaked = sorted(t for t in learned if any(flat(bad) in flat(t) for bad in NOT_MEMORIES))
    assert leaked == []
    assert sorted(learned) == sorted(m["text"] for m in expected("proration"))


@pytest.mark.slow
def test_a_paraphrased_question_injects_what_the_surface_left_out(project: Project) -> None:
    """After two sessions the project knows more than a 500-token surface holds. For
    every established memory the surface leaves out, a question worded differently
    (sharing a few content words) gets that memory injected by UserPromptSubmit, within
    300 tokens and without repeating what the surface shows; every memory is thus in
    view, on the surface or on demand."""
    everything = expected("proration", "refunds")
    assert sum(cg.estimate_tokens(m["text"]) for m in everything) > 500  # the premise
    for name in ("proration", "refunds"):
        done = project.stop(name)
        assert (done.returncode, project.log()) == (0, [])
    surface = context(project.session_start(), "SessionStart")
    carried = check_surface(surface, everything)
    left_out = [m for m in everything if m not in carried]
    assert left_out, "the surface holds everything: the premise of this test is gone"
    for memory in left_out:
        injected = context(project.ask(memory["question"]), "UserPromptSubmit")
        assert flat(memory["text"]) in flat(injected), (memory["question"], injected)
        assert cg.estimate_tokens(injected) <= 300 + 10  # the budget, plus its heading
        for shown in carried:
            assert flat(shown["text"]) not in flat(injected), shown["text"]
    assert project.log() == []


# -- two Stop hooks at once -----------------------------------------------------------------


def test_two_stop_hooks_at_once_lose_nothing_and_never_tear_the_surface(
    project: Project,
) -> None:
    """Two sessions' Stop hooks on one project at the same moment: both exit 0 silently;
    every memory of both sessions is there exactly once; the store verifies; the surface
    file, read over and over while they run, is always whole (the user's lines before and
    after it intact, one block between the markers); and afterwards its block is the
    surface the next SessionStart prints (regenerated after the later extraction)."""
    notes = project.repo / SURFACE_FILE
    notes.parent.mkdir()
    head, tail = "# My notes\nkeep me\n\n", "\n\n## Later\nand me\n"
    notes.write_text(f"{head}{START_MARK}\nstale\n{END_MARK}{tail}", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": SRC, "CORTEXGRAPH_HOME": str(project.home)}
    procs = []
    for name in ("proration", "refunds"):
        payload = project.payload("Stop", session_id(name), transcript_path=str(TRANSCRIPTS[name]))
        stdin = project.repo.parent / f"{name}-stop.json"
        stdin.write_text(json.dumps(payload), encoding="utf-8")
        with stdin.open(encoding="utf-8") as source:  # both start before either is awaited
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "cortexgraph.cli", "hook", "Stop"],
                    stdin=source,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    cwd=project.repo,
                    env=env,
                )
            )
    reads = 0
    while any(proc.poll() is None for proc in procs):  # observe, do not wait
        seen_head, _, seen_tail = split_surface_file(notes.read_text(encoding="utf-8"))
        assert (seen_head, seen_tail) == (head, tail)
        reads += 1
    outputs = [proc.communicate(timeout=10) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0]
    assert outputs == [("", ""), ("", "")]
    assert project.log() == []
    assert reads > 0

    learned = project.statements()
    for memory in expected("proration", "refunds"):
        assert len(learned.get(memory["text"], [])) == 1, memory["text"]
    report = cg.verify(project.store.root)
    assert report.ok, report

    seen_head, block, seen_tail = split_surface_file(notes.read_text(encoding="utf-8"))
    assert (seen_head, seen_tail) == (head, tail)
    assert block.strip() != "stale", "Stop did not regenerate the surface"
    assert block.strip() == context(project.session_start(), "SessionStart").strip()


# -- bad input --------------------------------------------------------------------------------


@pytest.fixture
def learned(project: Project) -> Project:
    """The project after the proration session's Stop: a store with memories in it."""
    done = project.stop("proration")
    assert (done.returncode, project.log()) == (0, [])
    return project


def garbage_transcript(folder: Path) -> tuple[Path, int]:
    """The refunds session with two bad lines among its good ones (a line cut short, as
    by a crash while appending, and a JSON value that is not an object); returns the
    file and the number of the first bad line."""
    lines = TRANSCRIPTS["refunds"].read_text(encoding="utf-8").splitlines()
    lines[6:6] = [lines[6][: len(lines[6]) // 2], "[1, 2, 3]"]
    path = folder / "garbage.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, 7


@pytest.mark.parametrize("event", ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"])
def test_malformed_stdin_is_logged_once_and_changes_nothing(learned: Project, event: str) -> None:
    """Whatever the event, stdin that is not JSON: exit 0, nothing printed, exactly one
    new log line naming the event, and the store as it was (journal seq and root)."""
    before, log = learned.state(), learned.log()
    done = learned.hook(event, '{"session_id": "s", "cwd": ')
    assert (done.returncode, done.stdout) == (0, "")
    new = learned.log()[len(log) :]
    assert len(new) == 1 and event in new[0], new
    assert learned.state() == before


def test_a_missing_transcript_is_logged_once_and_changes_nothing(learned: Project) -> None:
    """Stop for a session whose transcript file is gone: exit 0, nothing printed, one new
    log line naming the file, the store as it was."""
    before, log = learned.state(), learned.log()
    gone = learned.repo.parent / "gone.jsonl"
    done = learned.hook("Stop", learned.payload("Stop", "s9", transcript_path=str(gone)))
    assert (done.returncode, done.stdout) == (0, "")
    new = learned.log()[len(log) :]
    assert len(new) == 1 and "gone.jsonl" in new[0], new
    assert learned.state() == before


def test_garbage_transcript_lines_refuse_the_whole_transcript(learned: Project) -> None:
    """A transcript with bad lines among good ones is refused whole (nothing partial):
    exit 0, one new log line naming the first bad line, and none of the good lines'
    memories written, so the store is as it was. Once the bad lines are gone the same
    session is learned in full (the refusal left no cursor behind)."""
    path, bad_line = garbage_transcript(learned.repo.parent)
    before, log = learned.state(), learned.log()
    done = learned.hook("Stop", learned.payload("Stop", "s-garbage", transcript_path=str(path)))
    assert (done.returncode, done.stdout) == (0, "")
    new = learned.log()[len(log) :]
    assert len(new) == 1 and f"line {bad_line}" in new[0], new
    assert learned.state() == before

    shutil.copy(TRANSCRIPTS["refunds"], path)
    done = learned.hook("Stop", learned.payload("Stop", "s-garbage", transcript_path=str(path)))
    assert (done.returncode, learned.log()) == (0, log + new)
    texts = learned.statements()
    assert all(m["text"] in texts for m in expected("refunds"))


def test_outside_a_repository_every_hook_works_without_git(tmp_path: Path) -> None:
    """A cwd that is not a git repository is not an error: Stop learns the session
    without git context (no branch on the memories), SessionStart surfaces it and a
    prompt is answered, with no log line."""
    plain = tmp_path / "plain"
    plain.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    project = Project(plain, home)
    done = project.stop("proration")
    assert (done.returncode, done.stdout, project.log()) == (0, "", [])
    learned = project.statements()
    assert all(m["text"] in learned for m in expected("proration"))
    sources = [record.memory.source for (record, *_) in learned.values()]
    assert {source.branch if source else None for source in sources} == {None}
    surface = context(project.session_start(), "SessionStart")
    assert flat(expected("proration")[0]["text"]) in flat(surface)
    asked = project.ask("which package holds the ledger code")
    assert asked.returncode == 0
    if asked.stdout:
        context(asked, "UserPromptSubmit")
    assert project.log() == []


def unprivileged() -> dict[str, Any]:
    """How to run a hook so that file permissions bind: as is for a non-root user; as
    root, as user 65534 when that user can run this Python, else as root without the
    capabilities that override permissions (``setpriv``)."""
    if os.geteuid() != 0:
        return {}
    probe = [sys.executable, "-c", "import cortexgraph"]
    env = {**os.environ, "PYTHONPATH": SRC}
    try:
        ok = subprocess.run(
            probe, user=65534, group=65534, extra_groups=[], env=env, capture_output=True
        )
        if ok.returncode == 0:
            return {"user": 65534, "group": 65534, "extra_groups": []}
    except OSError:
        pass
    setpriv = shutil.which("setpriv")
    if setpriv is not None:
        drop = "-dac_override,-dac_read_search,-fowner"
        prefix = (setpriv, f"--inh-caps={drop}", f"--bounding-set={drop}", "--")
        if subprocess.run([*prefix, *probe], env=env, capture_output=True).returncode == 0:
            return {"command_prefix": prefix}
    pytest.skip("running as root with no way to drop the permission override")


def tree_digest(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def readonly_memory() -> Iterator[Project]:
    """A project that learned the proration session, in a directory every user can read,
    with its ``.memory`` tree then made read-only (restored for clean-up)."""
    shared = Path(tempfile.mkdtemp(prefix="cg-readonly-"))
    try:
        shared.chmod(0o755)
        repo, home = shared / "ledgerline", shared / "home"
        repo.mkdir()
        home.mkdir()
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
        project = Project(repo, home)
        assert project.stop("proration").returncode == 0
        assert project.statements()
        for path in [project.store.root, *project.store.root.rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        yield project
    finally:
        for path in [shared, *shared.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        shutil.rmtree(shared)


def test_a_read_only_memory_directory_exits_0_and_changes_nothing(
    readonly_memory: Project,
) -> None:
    """With ``.memory/`` read-only to the user the hooks run as, every hook exits 0
    (printing nothing or a well-formed context), and not a byte under ``.memory/``
    changes: no memory, no cursor, no log line (the log cannot be written either)."""
    project = readonly_memory
    how = unprivileged()
    before = tree_digest(project.store.root)
    state = project.state()
    refunds = str(TRANSCRIPTS["refunds"])
    runs = {
        "Stop": project.payload("Stop", session_id("refunds"), transcript_path=refunds),
        "SessionEnd": project.payload(
            "SessionEnd", session_id("refunds"), transcript_path=refunds, reason="exit"
        ),
        "SessionStart": project.payload("SessionStart", source="startup"),
        "UserPromptSubmit": project.payload("UserPromptSubmit", prompt="refund audit trail"),
    }
    for event, payload in runs.items():
        done = project.hook(event, payload, **how)
        assert done.returncode == 0, (event, done.stderr)
        if done.stdout:
            context(done, event)
        assert tree_digest(project.store.root) == before, event
    assert project.state() == state
