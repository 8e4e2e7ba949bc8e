"""Metamorphic tests: one operation script, several ways of running it, one resulting store.

A seed generates a script of operations as plain JSON-able dicts (every ``at`` explicit),
readable as JSON lines. The script runs under several configurations:

(a) every operation in a batch of its own, the store closed and reopened after each one;
(b) batches of 7 operations;
(c) one batch for the whole script;
(d) configuration (a) followed by ``cx.rebuild()``;
(e) a copy of (c) whose derived tables were dropped (``replay.drop_derived``), reopened
    and rebuilt from the journal.

All must give the same journal bytes, the same OverallRoot and identical digests of every
table (J4, M9). A snapshot records committed state, so a ``snapshot`` operation closes the
open batch in (b) and (c); batch boundaries still differ between the configurations.

Every operation says what it must do (``expect``): journal one ``entry``, journal the two
of an ``attest`` (an Attest citing earlier memories and the LearnWeights learned from it),
change nothing (``noop``), take a ``snapshot``, or fail with a named error. Invalid
operations (an update of a tombstone, a stale ``expected_version``, a head move past the
latest version, a bad namespace, an Attest citing no memory of the store, a LearnWeights
written or updated outside ``attest``) must fail the same way in every configuration and
journal nothing (J2, J5).

When a script fails, it is written to ``fixtures/metamorphic/failing-<seed>.jsonl`` and
the assertion message says so; every ``*.jsonl`` under ``fixtures/metamorphic/`` is
replayed by :func:`test_fixture_scripts` from then on (``basic.jsonl`` is a hand-written
script that covers every operation kind).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

import cortexgraph as cg
from cortexgraph.replay import drop_derived
from cortexgraph.store.env import DERIVED_TABLES

FIXTURE_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "metamorphic"
FIXTURES = sorted(FIXTURE_DIR.glob("*.jsonl"))  # globbed at collection: never empty (basic)
SEEDS = (1, 2, 3, 4)
SCRIPT_LENGTH = 150
ACTOR = "meta"
T0 = 1_700_000_000_000
NAMESPACES = ("default", "work", "personal.notes", "a-b_c")
TYPES = (
    "goal",
    "preference",
    "constraint",
    "fact",
    "pattern",
    "event",
    "artifact_ref",
    "attest",
    "learn_weights",
)
ERRORS = {
    "NotFoundError": cg.NotFoundError,
    "TombstonedError": cg.TombstonedError,
    "ValidationError": cg.ValidationError,
    "VersionConflictError": cg.VersionConflictError,
}
BATCH_SIZES = {"a: reopen after every op": 1, "b: batches of 7": 7, "c: one batch": None}

Op = dict[str, Any]


# ---------------------------------------------------------------------------
# scripts


class _Model:
    """What the generator needs to know to say what each operation must do."""

    def __init__(self) -> None:
        self.texts: list[list[str]] = []  # per memory, the text of each version
        self.heads: list[int] = []
        self.tombstoned: list[bool] = []
        self.learned: list[bool] = []  # a LearnWeights: only ``attest`` writes one

    def add(self, text: str, *, learned: bool = False) -> None:
        self.texts.append([text])
        self.heads.append(1)
        self.tombstoned.append(False)
        self.learned.append(learned)

    def latest(self, target: int) -> int:
        return len(self.texts[target])


def _text(rng: random.Random, label: str) -> str:
    flourish = rng.choice(["", " — café", " (cafe\u0301)", " 🚀", " 𝔘𝔫𝔦", " 禁止", " ß"])  # noqa: RUF001
    return f"{label}{flourish}"


def _tags(rng: random.Random) -> list[str]:
    pool = ["deploy", "Deploy", "ops", "ÜNÏ", "ci", "release", "x", "Ops"]
    return rng.sample(pool, rng.randrange(4))


def _memory(rng: random.Random, label: str) -> dict[str, Any]:
    """A memory of a random type, as ``cg.Memory.from_dict`` takes it."""
    kind = rng.choice(TYPES)
    memory: dict[str, Any] = {"type": kind, "text": _text(rng, label)}
    if rng.random() < 0.7:
        memory["tags"] = _tags(rng)
    if rng.random() < 0.4:
        memory["confidence"] = rng.choice([0.0, 0.25, 0.5, 0.8, 1.0])
    if rng.random() < 0.4:
        memory["priority"] = rng.randint(1, 10)
    if rng.random() < 0.2:
        memory["pinned"] = True
    if rng.random() < 0.2:
        memory["summary"] = f"summary of {label}"
    if kind == "goal":
        memory["status"] = rng.choice(["active", "achieved", "abandoned", "blocked"])
    elif kind == "event":
        memory["channel"] = rng.choice(["#ci", "#chat", "tty"])
        memory["occurred_at"] = T0 - rng.randrange(10**6)
    elif kind == "artifact_ref":
        content = f"def f{label.replace(' ', '_')}():\n    return 'grüß'\n"
        memory["path"] = f"src/{label.replace(' ', '_')}.py"
        memory["content"] = content
        memory["content_hash"] = "sha256:" + hashlib.sha256(content.encode()).hexdigest()
    elif kind == "attest":  # the generator turns it into an ``attest`` op when it can
        memory["cited"] = [f"cx://{ACTOR}/default/{rng.randbytes(16).hex()}@1"]
        memory["outcome"] = rng.choice(["success", "failure"])
    elif kind == "learn_weights":  # refused: weights are learned through ``attest`` only
        cut = sorted(rng.randrange(1_000_001) for _ in range(4))
        memory["weights"] = [b - a for a, b in zip([0, *cut], [*cut, 1_000_000], strict=True)]
    return memory


def generate_script(seed: int, length: int = SCRIPT_LENGTH) -> list[Op]:
    """A script of ``length`` operations, the same for the same seed.

    Roughly a fifth of the operations are invalid on purpose; each operation carries the
    effect it must have (``expect``), worked out from a small model of the store.
    """
    rng = random.Random(seed)
    model = _Model()
    script: list[Op] = []
    at = T0
    for i in range(length):
        at += rng.choice([0, 1, 1000, 1000, 60_000])  # repeats and jumps
        roll = rng.random()
        count = len(model.texts)
        if count == 0 or roll < 0.30:
            text_label = f"memory {count} from op {i}"
            op: Op = {"op": "write", "ns": rng.choice(NAMESPACES)}
            op["memory"] = _memory(rng, text_label)
            kind = op["memory"]["type"]
            if kind == "attest" and count and rng.random() < 0.5:  # cite earlier memories
                targets = sorted(rng.sample(range(count), min(count, rng.randint(1, 2))))
                outcome = op["memory"]["outcome"]
                op = {"op": "attest", "ns": op["ns"], "targets": targets, "outcome": outcome,
                      "text": text_label, "expect": "attest"}
                model.add(text_label)
                model.add("", learned=True)
            elif rng.random() < 0.08:  # not a valid name: nothing is journaled
                op["ns"] = "Not A Namespace"
                op["expect"] = "ValidationError"
            elif kind in ("attest", "learn_weights"):  # cites nothing real; not learned
                op["expect"] = "ValidationError"
            else:
                op["expect"] = "entry"
                model.add(op["memory"]["text"])
        elif roll < 0.90:
            target = rng.randrange(count)
            # mostly recent memories, so chains of versions get long
            if rng.random() < 0.6:
                target = max(0, count - 1 - rng.randrange(min(count, 5)))
            ref = rng.choice(["uri", "head", "id"])
            head, latest = model.heads[target], model.latest(target)
            dead = model.tombstoned[target]
            if roll < 0.64:
                op = {"op": "update", "target": target, "ref": ref}
                kind = rng.random()
                if kind < 0.1:  # the head's own text: the body does not change
                    op["changes"] = {"text": model.texts[target][head - 1]}
                    expect = "noop"
                else:
                    new_text = _text(rng, f"memory {target} v{latest + 1} from op {i}")
                    op["changes"] = {"text": new_text}
                    if rng.random() < 0.3:
                        op["changes"]["tags"] = _tags(rng)
                    if rng.random() < 0.3:
                        op["changes"]["priority"] = rng.randint(1, 10)
                    expect = "entry"
                if rng.random() < 0.4:
                    stale = rng.random() < 0.4
                    op["expected_version"] = head + 1 if stale else head
                    if stale:
                        expect = "VersionConflictError"
                if model.learned[target] and not dead:
                    expect = "ValidationError"
                if dead:
                    expect = "TombstonedError"
                op["expect"] = expect
                if expect == "entry":
                    model.texts[target].append(op["changes"]["text"])
                    model.heads[target] = latest + 1
            elif roll < 0.79:
                version = latest + 1 if rng.random() < 0.2 else rng.randint(1, latest)
                op = {"op": "update_head", "target": target, "ref": ref, "version": version}
                if dead:
                    op["expect"] = "TombstonedError"
                elif version > latest:
                    op["expect"] = "NotFoundError"
                elif version == head:
                    op["expect"] = "noop"
                else:
                    op["expect"] = "entry"
                    model.heads[target] = version
            else:
                op = {"op": "tombstone", "target": target, "ref": ref}
                if rng.random() < 0.7:
                    op["reason"] = rng.choice(["superseded", "wrong — ersetzt 🆕", "stale"])
                op["expect"] = "TombstonedError" if dead else "entry"
                model.tombstoned[target] = True
        else:
            op = {"op": "snapshot", "expect": "snapshot"}
        op["at"] = at
        script.append(op)
    return script


def dump_script(script: list[Op], path: Path) -> None:
    """Write ``script`` as JSON lines, one operation per line, in a readable key order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(op, ensure_ascii=False) for op in script]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def load_script(path: Path) -> list[Op]:
    """Read a script written by :func:`dump_script` (blank lines are ignored)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


# ---------------------------------------------------------------------------
# running


class _Runner:
    """Runs a script on one store and records what every operation did."""

    def __init__(self, root: Path, *, batch_size: int | None) -> None:
        self.root = root
        self.batch_size = batch_size
        self.reopen = batch_size == 1
        self.cx = self._open()
        self.uris: list[cg.MemoryURI] = []
        self.outcomes: list[str] = []

    def _open(self) -> cg.Cortex:
        return cg.open(self.root, ACTOR, clock=cg.ManualClock(T0), sync=False)

    def run(self, script: list[Op]) -> None:
        pending: list[tuple[int, Op]] = []
        for index, op in enumerate(script):
            if op["op"] == "snapshot":
                self._flush(pending)
                pending = []
                manifest = self.cx.snapshot(at=op["at"])
                self.outcomes.append(
                    f"{index}: snapshot seq {manifest.seq} at {manifest.at}"
                    f" root {manifest.overall_root.hex()}"
                )
                continue
            pending.append((index, op))
            if self.batch_size is not None and len(pending) == self.batch_size:
                self._flush(pending)
                pending = []
        self._flush(pending)

    def _flush(self, pending: list[tuple[int, Op]]) -> None:
        if not pending:
            return
        if self.batch_size == 1:
            ((index, op),) = pending
            self._apply(index, op, self.cx)
            self.cx.close()
            self.cx = self._open()
            return
        with self.cx.batch() as batch:
            for index, op in pending:
                self._apply(index, op, batch)

    def _ref(self, op: Op) -> str:
        uri = self.uris[op["target"]]
        form = op["ref"]
        if form == "uri":
            return str(uri)
        if form == "head":
            return str(uri.head)
        if form == "id":
            return uri.id_hex
        raise ValueError(f"unknown ref form {form!r}")

    def _apply(self, index: int, op: Op, target: cg.Cortex | cg.Batch) -> None:
        """Run one operation and check that it had the effect it must have."""
        before = self.cx.seq  # read-your-writes inside a batch
        try:
            result = self._call(op, target)
        except cg.CortexError as exc:
            outcome = type(exc).__name__
        else:
            outcome = "ok " + str(result)
        journaled = self.cx.seq - before
        self.outcomes.append(f"{index}: {op['op']} -> {outcome} (+{journaled})")
        expect = op["expect"]
        if expect in ERRORS:
            ok = outcome == expect and journaled == 0
        else:
            entries = {"entry": 1, "attest": 2}.get(expect, 0)
            ok = outcome.startswith("ok ") and journaled == entries
        if not ok:
            raise AssertionError(
                f"op {index} {json.dumps(op, ensure_ascii=False)} must give {expect!r};"
                f" it gave {outcome!r} and journaled {journaled} entries"
            )

    def _call(self, op: Op, target: cg.Cortex | cg.Batch) -> cg.MemoryURI:
        kind, at = op["op"], op["at"]
        if kind == "write":
            uri = target.write(cg.Memory.from_dict(op["memory"]), ns=op["ns"], at=at)
            self.uris.append(uri)
            return uri
        if kind == "update":
            return target.update(
                self._ref(op), expected_version=op.get("expected_version"), at=at, **op["changes"]
            )
        if kind == "attest":
            cited = [self.uris[t] for t in op["targets"]]
            done = target.attest(cited, outcome=op["outcome"], text=op["text"], ns=op["ns"], at=at)
            self.uris += [done.attest, done.learn]
            return done.learn
        if kind == "update_head":
            return target.update_head(self._ref(op), version=op["version"], at=at)
        if kind == "tombstone":
            return target.tombstone(self._ref(op), reason=op.get("reason", ""), at=at)
        raise ValueError(f"unknown op {kind!r}")


def store_state(cx: cg.Cortex) -> dict[str, Any]:
    """Everything the configurations must agree on."""
    return {
        "journal": list(cx.journal_bytes()),
        "overall_root": cx.overall_root().hex(),
        "digests": cx.table_digests(),
    }


def _differences(name: str, expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    out = []
    if expected["journal"] != actual["journal"]:
        pairs = zip(expected["journal"], actual["journal"], strict=False)
        seq = next((a[0] for a, b in pairs if a != b), None)
        out.append(
            f"{name}: journal differs ({len(expected['journal'])} vs"
            f" {len(actual['journal'])} entries, first differing seq {seq})"
        )
    if expected["overall_root"] != actual["overall_root"]:
        out.append(f"{name}: OverallRoot {actual['overall_root']} != {expected['overall_root']}")
    tables = [t for t in expected["digests"] if expected["digests"][t] != actual["digests"].get(t)]
    if tables:
        out.append(f"{name}: table digests differ: {', '.join(tables)}")
    return out


def run_configurations(script: list[Op], workdir: Path) -> list[str]:
    """Run ``script`` under every configuration; return how they disagree (empty: agree)."""
    states: dict[str, dict[str, Any]] = {}
    outcomes: dict[str, list[str]] = {}
    for name, size in BATCH_SIZES.items():
        root = workdir / name[0]
        runner = _Runner(root, batch_size=size)
        try:
            runner.run(script)
            states[name] = store_state(runner.cx)
            outcomes[name] = runner.outcomes
            if size == 1:
                runner.cx.rebuild()
                states["d: (a) then rebuild"] = store_state(runner.cx)
        finally:
            runner.cx.close()  # the handle open now: (a) reopened it after every op

    copy = workdir / "e"
    shutil.copytree(workdir / "c" / ACTOR, copy / ACTOR)
    with cg.open(copy, ACTOR, sync=False) as cx:
        drop_derived(cx._handle)
    with cg.open(copy, ACTOR, sync=False) as cx:
        dropped = cx.stats()
        if dropped.memories or any(dropped.tables[t] for t in DERIVED_TABLES):
            return [f"e: drop_derived left derived rows: {dropped.tables}"]
        cx.rebuild()
        states["e: drop_derived, reopen, rebuild"] = store_state(cx)

    first = next(iter(BATCH_SIZES))
    problems = []
    for name, seen in outcomes.items():
        if seen != outcomes[first]:
            where = next(
                i for i, (x, y) in enumerate(zip(seen, outcomes[first], strict=False)) if x != y
            )
            problems.append(f"{name}: outcome {seen[where]!r} != {outcomes[first][where]!r}")
    for name, state in states.items():
        problems.extend(_differences(name, states[first], state))
    if not states[first]["journal"]:
        problems.append("the script journaled nothing")
    return problems


def check_script(script: list[Op], workdir: Path, *, save_to: Path | None) -> None:
    """Fail, saving the script to ``save_to`` (if given), unless every configuration agrees."""
    try:
        problems = run_configurations(script, workdir)
        error: BaseException | None = None
    except Exception as exc:  # an op had the wrong effect, or the store raised
        problems, error = [f"{type(exc).__name__}: {exc}"], exc
    if not problems:
        return
    saved = ""
    if save_to is not None:
        dump_script(script, save_to)
        saved = f"; the script is saved as {save_to} (replayed by test_fixture_scripts)"
    message = "\n".join(["the configurations disagree" + saved, *problems])
    raise AssertionError(message) from error


# ---------------------------------------------------------------------------
# tests


@pytest.mark.parametrize("seed", SEEDS)
def test_configurations_agree(seed: int, tmp_path: Path) -> None:
    """A seeded script of 150 operations gives the same journal bytes, OverallRoot and
    table digests run op by op with reopens, in batches of 7, in one batch, and rebuilt
    from the journal (twice); every op has its expected effect in each configuration,
    and invalid ops fail identically without journaling anything."""
    script = generate_script(seed)
    check_script(script, tmp_path, save_to=FIXTURE_DIR / f"failing-{seed}.jsonl")


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_fixture_scripts(path: Path, tmp_path: Path) -> None:
    """Every saved script (regressions and the hand-written ``basic.jsonl``) still runs
    with the same results in every configuration."""
    check_script(load_script(path), tmp_path, save_to=None)


def test_fixture_directory_has_the_basic_script() -> None:
    """The fixture test can never be an empty parametrization: ``basic.jsonl`` is collected,
    and it covers every operation kind, every effect, and every memory type."""
    names = [p.name for p in FIXTURES]
    script = load_script(FIXTURE_DIR / "basic.jsonl")
    ops = {op["op"] for op in script}
    effects = {op["expect"] for op in script}
    types = {op["memory"]["type"] for op in script if op["op"] == "write"}

    assert "basic.jsonl" in names
    assert {"write", "attest", "update", "update_head", "tombstone", "snapshot"} == ops
    assert {"entry", "attest", "noop", "snapshot", *ERRORS} == effects
    assert set(TYPES) == types


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_scripts_are_not_trivial(seed: int) -> None:
    """Each seeded script exercises every op kind, every memory type, several namespaces,
    all three reference forms, no-ops and every kind of invalid operation, so agreement
    cannot come from doing nothing; and a seed always gives the same script."""
    script = generate_script(seed)
    effects = {op["expect"] for op in script}
    kinds = {op["op"] for op in script}
    types = {op["memory"]["type"] for op in script if op["op"] == "write"}
    namespaces = {op["ns"] for op in script if op["op"] == "write"}
    refs = {op["ref"] for op in script if "ref" in op}

    assert len(script) == SCRIPT_LENGTH
    assert {"write", "attest", "update", "update_head", "tombstone", "snapshot"} == kinds
    assert {"entry", "attest", "noop", "snapshot", *ERRORS} == effects
    assert set(TYPES) == types
    assert set(NAMESPACES) < namespaces  # plus the invalid one
    assert {"uri", "head", "id"} == refs
    assert generate_script(seed) == script


def test_scripts_round_trip_through_json_lines(tmp_path: Path) -> None:
    """A saved script is one readable JSON object per line (non-ASCII kept as is) and
    loads back equal, so a saved failure replays exactly."""
    script = generate_script(SEEDS[0])
    path = tmp_path / "script.jsonl"
    dump_script(script, path)
    lines = path.read_text(encoding="utf-8").splitlines()

    assert len(script) == len(lines)
    assert all(line.startswith('{"op": ') for line in lines)
    assert script == load_script(path)


def test_a_failing_script_is_saved_and_named(tmp_path: Path) -> None:
    """When an operation does not have its expected effect, the check fails with a message
    naming the saved file, and the file replays the same script."""
    script = load_script(FIXTURE_DIR / "basic.jsonl")
    broken = [dict(op) for op in script]
    wrong = next(i for i, op in enumerate(broken) if op["expect"] == "TombstonedError")
    broken[wrong]["expect"] = "entry"
    target = tmp_path / "saved" / "failing-0.jsonl"

    with pytest.raises(AssertionError, match=r"saved as .*failing-0\.jsonl") as info:
        check_script(broken, tmp_path / "run", save_to=target)

    assert f"op {wrong} " in str(info.value)
    assert broken == load_script(target)
