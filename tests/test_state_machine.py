"""Cortex agrees with a plain-dict model under random write / update / update_head /
tombstone / batch / reopen sequences. (A drawn Attest is made to cite memories the model
holds; a drawn LearnWeights must be refused: only ``attest`` writes one.)

The model shares no code with ``cortexgraph.core.journal``: it is dicts and lists
(id -> versions, head, status, namespace) and a list of the ops that should have been
journaled. After every step every memory resolves (head and every pinned version) to what
the model holds, ``cx.seq`` counts the model's ops, and ``cx.journal()`` replays the
model's op log entry by entry.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import attrs
import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import cortexgraph as cg
from cortexgraph.core.taxonomy import memory_from_body
from strategies import memories, memory_changes, memory_ids, names, short_texts

ACTOR = "agent"
T0 = 1_700_000_000_000
REF_FORMS = ("uri", "pinned", "str", "id", "hex")


@attrs.define
class ModelMemory:
    """What the model knows about one memory. ``versions[i]`` is version ``i + 1``
    as ``(memory, seq, at)``."""

    ns: str
    versions: list[tuple[cg.Memory, int, int]]
    head: int = 1
    status: str = "active"

    def copy(self) -> ModelMemory:
        return ModelMemory(self.ns, list(self.versions), self.head, self.status)


@attrs.define
class Model:
    """Every memory by id (in write order) and the ops that were journaled, in order."""

    memories: dict[bytes, ModelMemory] = attrs.Factory(dict)
    log: list[tuple[Any, ...]] = attrs.Factory(list)

    def copy(self) -> Model:
        return Model({k: m.copy() for k, m in self.memories.items()}, list(self.log))

    def pick(self, index: int) -> bytes:
        """A memory by index; three times in four an active one, if there is one."""
        active = [mid for mid, mm in self.memories.items() if mm.status == "active"]
        if active and index % 4:
            return active[index // 4 % len(active)]
        ids = list(self.memories)
        return ids[index % len(ids)]


# Ops are plain data drawn up front; ids are picked by index when the op runs, so a
# batch can act on the memories it wrote itself.
writes = st.tuples(
    st.just("write"),
    memories(text_size=12),
    st.one_of(st.sampled_from(["default", "work"]), names()),
)
updates = st.tuples(
    st.just("update"),
    st.integers(0, 1000),  # which memory
    st.sampled_from(REF_FORMS),
    memory_changes(),
    st.sampled_from(["new", "new", "new", "identical"]),
    st.sampled_from(["none", "none", "right", "stale"]),
    st.sampled_from([-1, 1, 2]),  # how stale
)
head_moves = st.tuples(
    st.just("head"),
    st.integers(0, 1000),
    st.sampled_from(REF_FORMS),
    st.integers(0, 1000),  # which version (see _run)
)
tombstones = st.tuples(
    st.just("tombstone"),
    st.integers(0, 1000),
    st.sampled_from(REF_FORMS),
    st.one_of(st.just(""), short_texts().map(lambda s: s or "")),
)
any_op = st.one_of(writes, updates, updates, head_moves, head_moves, tombstones)


def _ref(model: Model, mid: bytes, form: str) -> Any:
    mm = model.memories[mid]
    uri = cg.MemoryURI(ACTOR, mm.ns, mid)
    if form == "pinned":
        return uri.at_version(len(mm.versions))
    if form == "str":
        return str(uri)
    if form == "id":
        return mid
    if form == "hex":
        return mid.hex()
    return uri


class CortexMachine(RuleBasedStateMachine):
    """Drives one Cortex and the model through the same ops and compares them."""

    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="cg-sm-")
        self.clock = cg.ManualClock(T0)
        self.now = T0
        self.cx = self._open()
        self.model = Model()

    def _open(self) -> cg.Cortex:
        return cg.open(self.root, ACTOR, clock=self.clock, sync=False)

    def teardown(self) -> None:
        self.cx.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def _tick(self) -> int:
        self.now += 1_000
        return self.now

    # -- one op against a target (the handle or a batch) and a model -------------------

    def _run(self, target: Any, model: Model, op: tuple[Any, ...]) -> None:
        kind = op[0]
        at = self._tick()
        if kind == "write":
            _, memory, ns = op
            if isinstance(memory, cg.Attest) and model.memories:  # cite what exists
                cited = [cg.MemoryURI(ACTOR, mm.ns, mid, mm.head) for mid, mm in
                         list(model.memories.items())[-2:]]
                memory = attrs.evolve(memory, cited=[str(uri) for uri in cited])
            if isinstance(memory, cg.LearnWeights) or (
                isinstance(memory, cg.Attest) and not model.memories
            ):  # a LearnWeights only comes from attest(); an Attest must cite this store
                with pytest.raises(cg.ValidationError):
                    target.write(memory, ns=ns, at=at)
                return
            uri = target.write(memory, ns=ns, at=at)
            assert (uri.actor, uri.ns, uri.version) == (ACTOR, ns, 1)
            assert uri.id not in model.memories
            seq = len(model.log) + 1
            model.memories[uri.id] = ModelMemory(ns, [(memory, seq, at)])
            model.log.append(("write", ns, uri.id, at, memory))
            assert target.resolve(uri).memory == memory  # read-your-writes, also in a batch
            return
        if not model.memories:
            return
        mid = model.pick(op[1])
        mm = model.memories[mid]
        ref = _ref(model, mid, op[2])
        here = cg.MemoryURI(ACTOR, mm.ns, mid)
        if kind == "update":
            self._update(target, model, mid, ref, at, *op[3:])
        elif kind == "head":
            latest = len(mm.versions)
            version = latest + 1 if op[3] % 5 == 0 else 1 + op[3] % latest  # or a missing one
            event(f"head: {self._outcome(mm, version > len(mm.versions), version == mm.head)}")
            if mm.status == "tombstoned":
                with pytest.raises(cg.TombstonedError):
                    target.update_head(ref, version=version, at=at)
            elif version > len(mm.versions):
                with pytest.raises(cg.NotFoundError):
                    target.update_head(ref, version=version, at=at)
            else:
                assert target.update_head(ref, version=version, at=at) == here.at_version(version)
                if version != mm.head:
                    mm.head = version
                    model.log.append(("head", mm.ns, mid, at, version))
        else:
            reason = op[3]
            event(f"tombstone: {self._outcome(mm, False, False)}")
            if mm.status == "tombstoned":
                with pytest.raises(cg.TombstonedError):
                    target.tombstone(ref, reason=reason, at=at)
            else:
                assert target.tombstone(ref, reason=reason, at=at) == here.at_version(mm.head)
                mm.status = "tombstoned"
                model.log.append(("tombstone", mm.ns, mid, at, reason))

    @staticmethod
    def _outcome(mm: ModelMemory, error: bool, unchanged: bool) -> str:
        if mm.status == "tombstoned":
            return "tombstoned"
        return "error" if error else "no-op" if unchanged else "journaled"

    def _update(
        self,
        target: Any,
        model: Model,
        mid: bytes,
        ref: Any,
        at: int,
        changes: dict[str, Any],
        mode: str,
        expect: str,
        stale_delta: int,
    ) -> None:
        mm = model.memories[mid]
        current = mm.versions[mm.head - 1][0]
        if mode == "identical":
            changes = {name: getattr(current, name) for name in changes}
        expected_version = None
        if expect == "right":
            expected_version = mm.head
        elif expect == "stale":
            expected_version = mm.head + stale_delta
            if expected_version < 1:
                expected_version = mm.head + 1
        new = attrs.evolve(current, **changes)
        event(f"update: {self._outcome(mm, expect == 'stale', new == current)}")
        if mm.status == "tombstoned":
            with pytest.raises(cg.TombstonedError):
                target.update(ref, expected_version=expected_version, at=at, **changes)
            return
        if expect == "stale":
            with pytest.raises(cg.VersionConflictError):
                target.update(ref, expected_version=expected_version, at=at, **changes)
            return
        uri = target.update(ref, expected_version=expected_version, at=at, **changes)
        here = cg.MemoryURI(ACTOR, mm.ns, mid)
        if new == current:
            assert uri == here.at_version(mm.head)  # nothing journaled
            return
        version = len(mm.versions) + 1
        assert uri == here.at_version(version)
        mm.versions.append((new, len(model.log) + 1, at))
        mm.head = version
        model.log.append(("update", mm.ns, mid, at, version, new))

    # -- rules --------------------------------------------------------------------------

    @initialize(op=writes)
    def first_write(self, op: tuple[Any, ...]) -> None:
        self._run(self.cx, self.model, op)

    @rule(op=writes)
    def write(self, op: tuple[Any, ...]) -> None:
        self._run(self.cx, self.model, op)

    @precondition(lambda self: self.model.memories)
    @rule(op=updates)
    def update(self, op: tuple[Any, ...]) -> None:
        seq = self.cx.seq
        log_size = len(self.model.log)
        self._run(self.cx, self.model, op)
        assert self.cx.seq - seq == len(self.model.log) - log_size  # no entry when unchanged

    @precondition(lambda self: self.model.memories)
    @rule(op=head_moves)
    def update_head(self, op: tuple[Any, ...]) -> None:
        self._run(self.cx, self.model, op)

    @precondition(lambda self: self.model.memories)
    @rule(op=tombstones)
    def tombstone(self, op: tuple[Any, ...]) -> None:
        self._run(self.cx, self.model, op)

    @rule(ops=st.lists(any_op, min_size=1, max_size=5), fail=st.booleans())
    def batch(self, ops: list[tuple[Any, ...]], fail: bool) -> None:
        trial = self.model.copy()
        seq = self.cx.seq

        class Abort(Exception):
            pass

        try:
            with self.cx.batch() as b:
                for op in ops:
                    self._run(b, trial, op)
                if fail:
                    raise Abort
        except Abort:
            event(f"batch of {len(ops)}: aborted")
            assert self.cx.seq == seq  # rolled back; the model keeps its state
        else:
            event(f"batch of {len(ops)}: committed")
            self.model = trial

    @rule()
    def reopen(self) -> None:
        self.cx.close()
        self.cx = self._open()

    @rule(mid=memory_ids())
    def unknown_memory(self, mid: bytes) -> None:
        if mid in self.model.memories:
            return
        uri = cg.MemoryURI(ACTOR, "default", mid)
        at = self._tick()
        with pytest.raises(cg.NotFoundError):
            self.cx.resolve(uri)
        with pytest.raises(cg.NotFoundError):
            self.cx.update(uri, text="x", at=at)
        with pytest.raises(cg.NotFoundError):
            self.cx.update_head(mid, version=1, at=at)
        with pytest.raises(cg.NotFoundError):
            self.cx.tombstone(mid.hex(), at=at)

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def seq_counts_journaled_ops(self) -> None:
        assert self.cx.seq == len(self.model.log)

    @invariant()
    def every_version_resolves_as_modelled(self) -> None:
        for mid, mm in self.model.memories.items():
            uri = cg.MemoryURI(ACTOR, mm.ns, mid)
            latest = len(mm.versions)
            created_at = mm.versions[0][2]
            records = []
            for version, (memory, seq, at) in enumerate(mm.versions, start=1):
                expected = cg.Record(
                    uri=uri.at_version(version),
                    memory=memory,
                    version=version,
                    seq=seq,
                    at=at,
                    head=mm.head,
                    latest=latest,
                    status=mm.status,
                    created_at=created_at,
                )
                assert self.cx.resolve(uri.at_version(version)) == expected
                records.append(expected)
            assert self.cx.resolve(uri) == records[mm.head - 1]
            assert self.cx.history(mid) == records
            with pytest.raises(cg.NotFoundError):
                self.cx.resolve(uri.at_version(latest + 1))

    @invariant()
    def journal_replays_the_model_log(self) -> None:
        entries = list(self.cx.journal())
        assert [e.seq for e in entries] == list(range(1, len(self.model.log) + 1))
        seen = []
        for entry in entries:
            row: tuple[Any, ...] = (entry.op, entry.ns, entry.memory_id, entry.at)
            if entry.op == "write":
                row += (memory_from_body(entry.fields["body"]),)
            elif entry.op == "update":
                row += (entry.fields["version"], memory_from_body(entry.fields["body"]))
            elif entry.op == "head":
                row += (entry.fields["version"],)
            else:
                row += (entry.fields.get("reason", ""),)
            seen.append(row)
        assert seen == self.model.log


class TestCortexMatchesModel(CortexMachine.TestCase):  # type: ignore[name-defined]
    """Random op sequences (writes of all nine types, updates with right, stale and no
    expected_version, identical updates, head moves to existing and missing versions,
    tombstones, committed and aborted batches, reopens) leave Cortex agreeing with the
    dict model after every step: resolve, history, seq and the journal (J1, J3, J5)."""

    settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
