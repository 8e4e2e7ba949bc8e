"""Cortex agrees with a plain-dict model under random sequences of the whole write API:
write / update / update_head / tombstone, add_edge / remove_edge (aliases, strengths,
statuses, origins), late-binding find and recall (accesses, restoring archived memories),
attest, compact under a controlled clock (archive, prune, merge, weaken), snapshot,
rebuild, reopen, and batches that commit, abort, or fail in the middle.

The model shares no code with the implementation: it is dicts and lists (id -> versions,
head, status, namespace, access counts; edges by ``(src, relation, dst)``) and a list of
the rows that should have been journaled. After every step every memory resolves (head
and every pinned version) to what the model holds, its out-edges and centrality are the
model's, ``cx.seq`` counts the model's rows, ``cx.journal()`` replays them entry by
entry, the MMR root is recomputed here from the journal bytes (RFC 6962 hashing written
out below), and the OverallRoot is the documented hash of the journal size, that root and
the SMT root; ``rebuild`` must leave every table and the root unchanged.

Two things the model takes from the code under test, because computing them would mean
re-implementing it: the ids of new memories (hashes of the canonical body) and the
weights ``attest`` learns (checked for their documented bounds and carried forward
exactly). Compaction is kept exactly predictable by construction: time moves in
one-second ticks or jumps of twenty years, so every age is far from the 14- and 30-day
thresholds and every decaying type's recency is ~0; confidences near 0.3 are nudged away
from the boundary; and the only consolidation candidates are "plain" memories written by
the ``pair`` rule, whose indexed terms are a known set of words.
"""

from __future__ import annotations

import shutil
import struct
import tempfile
from typing import Any

import attrs
import blake3
import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import cortexgraph as cg
from cortexgraph.core.body import memory_from_body
from cortexgraph.core.taxonomy import OUTCOMES
from strategies import memories, memory_changes, memory_ids, names, short_texts

ACTOR = "agent"
T0 = 1_700_000_000_000
DAY = 86_400_000
JUMP = 20 * 365 * DAY  # far past every lifecycle threshold; decaying recency ~ 2**-20
REF_FORMS = ("uri", "pinned", "str", "id", "hex")
PPM = 1_000_000
DEFAULT_WEIGHTS = (450_000, 200_000, 150_000, 100_000, 100_000)

# The documented vocabulary of edges (DESIGN section 9), written out here, not imported.
ALIASES = {
    "relates_to": "relates_to", "related": "relates_to",
    "derived_from": "derived_from", "derives": "derived_from",
    "contradicts": "contradicts", "contradict": "contradicts",
    "exemplifies": "exemplifies", "example": "exemplifies",
    "refines": "refines", "refine": "refines",
    "supersedes": "supersedes", "supersede": "supersedes",
    "source_of": "source_of", "source": "source_of",
}
DECAYING = frozenset({"preference", "pattern", "event"})  # the rest have no half-life
MERGEABLE = frozenset({"goal", "preference", "constraint", "fact", "pattern"})
#: words the keyword index keeps as they are (no stem, no stopword)
WORDS = ("amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "harbor")


@attrs.define
class ModelMemory:
    """What the model knows about one memory. ``versions[i]`` is version ``i + 1``
    as ``(memory, seq, at)``. ``plain`` memories (from the ``pair`` rule) have known
    indexed terms; they are never updated or moved, so their terms stay known."""

    ns: str
    versions: list[tuple[cg.Memory, int, int]]
    head: int = 1
    status: str = "active"
    updated_at: int = 0
    accesses: int = 0
    last_access: int = 0
    plain: bool = False

    def copy(self) -> ModelMemory:
        return attrs.evolve(self, versions=list(self.versions))

    @property
    def memory(self) -> cg.Memory:
        return self.versions[self.head - 1][0]

    @property
    def head_at(self) -> int:
        return self.versions[self.head - 1][2]

    def terms(self) -> frozenset[str]:
        memory = self.memory
        return frozenset(memory.text.split()) | frozenset(memory.tags)


EdgeKey = tuple[bytes, str, bytes]


@attrs.define
class ModelEdge:
    status: str
    ppm: int
    origin: str
    at: int
    seq: int


@attrs.define
class Model:
    """Every memory by id (in write order), every edge, the learned weights, the stored
    snapshots (seq -> (at, overall root)) and the rows that were journaled, in order."""

    memories: dict[bytes, ModelMemory] = attrs.Factory(dict)
    edges: dict[EdgeKey, ModelEdge] = attrs.Factory(dict)
    weights: tuple[int, ...] = DEFAULT_WEIGHTS
    snapshots: dict[int, tuple[int, bytes]] = attrs.Factory(dict)
    log: list[tuple[Any, ...]] = attrs.Factory(list)

    def copy(self) -> Model:
        return Model(
            {k: m.copy() for k, m in self.memories.items()},
            {k: attrs.evolve(e) for k, e in self.edges.items()},
            self.weights,
            dict(self.snapshots),
            list(self.log),
        )

    @property
    def next_seq(self) -> int:
        return len(self.log) + 1

    def pick(self, index: int, *, movable: bool = False) -> bytes | None:
        """A memory by index; three times in four an active one, if there is one.
        ``movable``: not a plain memory (whose content must stay known)."""
        ids = [mid for mid, mm in self.memories.items() if not (movable and mm.plain)]
        if not ids:
            return None
        active = [mid for mid in ids if self.memories[mid].status == "active"]
        if active and index % 4:
            return active[index // 4 % len(active)]
        return ids[index % len(ids)]

    def in_degree(self, mid: bytes) -> int:
        return sum(
            1 for (_, _, dst), e in self.edges.items() if dst == mid and e.status == "active"
        )

    def hub(self, mid: bytes) -> bool:
        """Centrality strictly above 0.5 (in-degree over the highest in-degree)."""
        highest = max((self.in_degree(m) for m in self.memories), default=0)
        return highest > 0 and 2 * self.in_degree(mid) > highest

    def set_status(self, mid: bytes, status: str, at: int) -> None:
        mm = self.memories[mid]
        mm.status, mm.updated_at = status, at
        self.log.append(("status", mm.ns, mid, at, status))

    def put_edge(self, src: bytes, rel: str, dst: bytes, ppm: int, status: str, origin: str,
                 at: int) -> ModelEdge:
        """``add_edge``: a new or changed edge is journaled, an identical one is not."""
        old = self.edges.get((src, rel, dst))
        if old is not None and (old.status, old.ppm, old.origin) == (status, ppm, origin):
            return old
        self.edges[src, rel, dst] = new = ModelEdge(status, ppm, origin, at, self.next_seq)
        self.log.append(("edge", self.memories[src].ns, src, at, dst, rel, ppm, status, origin))
        return new

    def drop_edge(self, src: bytes, rel: str, dst: bytes, at: int) -> None:
        del self.edges[src, rel, dst]
        self.log.append(("unedge", self.memories[src].ns, src, at, dst, rel))

    def access(self, ids: list[bytes], at: int) -> None:
        """A late-binding read: one ``access`` row per namespace, ids sorted; an archived
        memory that is read becomes active again."""
        by_ns: dict[str, set[bytes]] = {}
        for mid in ids:
            by_ns.setdefault(self.memories[mid].ns, set()).add(mid)
        for ns in sorted(by_ns):
            for mid in sorted(by_ns[ns]):
                mm = self.memories[mid]
                if mm.status == "archived":
                    mm.status, mm.updated_at = "active", at
                mm.accesses += 1
                mm.last_access = max(mm.last_access, at)
            self.log.append(("access", ns, None, at, tuple(sorted(by_ns[ns]))))


def _safe_confidence(memory: cg.Memory) -> cg.Memory:
    """Keep confidences away from the 0.3 archive threshold (see the module doc)."""
    if abs(memory.confidence - 0.3) < 0.01:
        return attrs.evolve(memory, confidence=0.5)
    return memory


# Ops are plain data drawn up front; ids are picked by index when the op runs, so a
# batch can act on the memories it wrote itself.
writes = st.tuples(
    st.just("write"),
    memories(text_size=12).map(_safe_confidence),
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
edge_adds = st.tuples(
    st.just("edge"),
    st.integers(0, 1000),  # source
    st.integers(0, 1000),  # target
    st.sampled_from([*ALIASES, "relates_to", "relates_to", "likes"]),
    st.sampled_from([0.0, 0.25, 0.45, 0.5, 0.75, 1.0, 1.0, 1.5]),
    st.sampled_from(["active", "active", "suggested", "dormant"]),
    st.sampled_from(["system", "system", "human", "llm"]),
    st.sampled_from(REF_FORMS),
)
edge_removals = st.tuples(
    st.just("unedge"),
    st.integers(0, 1000),  # an existing edge (two times in three), else two memories
    st.integers(0, 1000),
    st.sampled_from([*ALIASES, "likes"]),
    st.sampled_from(REF_FORMS),
)
attests = st.tuples(
    st.just("attest"),
    st.lists(st.integers(0, 1000), min_size=0, max_size=3),  # cited (none: refused)
    st.sampled_from([*OUTCOMES, *OUTCOMES, "maybe"]),
    st.sampled_from(["", "deploy went fine"]),
    st.sampled_from(["default", "work"]),
    st.sampled_from(REF_FORMS),
)
any_op = st.one_of(
    writes, updates, head_moves, tombstones, edge_adds, edge_adds, edge_removals, attests
)
#: invalid verbs that refuse before touching the store
bad_verbs = st.sampled_from(["self-edge", "strength", "unknown-field", "learn-weights"])


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


def _leaf(data: bytes) -> bytes:
    return blake3.blake3(b"\x00" + data).digest()


def _tree_hash(leaves: list[bytes]) -> bytes:
    """RFC 6962 Merkle Tree Hash over leaf hashes (the split is the largest power of two
    below the size), written out independently of ``cortexgraph.core.roots``."""
    if not leaves:
        return blake3.blake3(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    split = 1
    while split * 2 < len(leaves):
        split *= 2
    return blake3.blake3(b"\x01" + _tree_hash(leaves[:split]) + _tree_hash(leaves[split:])).digest()


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

    def _changed(self, rule: str, seq: int) -> None:
        """Count whether a rule really changed state (a journal entry was appended)."""
        event(f"{rule}: {'journaled' if self.cx.seq > seq else 'nothing journaled'}")

    # -- one op against a target (the handle or a batch) and a model -------------------

    def _run(self, target: Any, model: Model, op: tuple[Any, ...]) -> None:
        kind = op[0]
        at = self._tick()
        if kind == "write":
            self._write(target, model, op[1], op[2], at)
            return
        if kind == "edge":
            self._add_edge(target, model, at, *op[1:])
            return
        if kind == "unedge":
            self._remove_edge(target, model, at, *op[1:])
            return
        if kind == "attest":
            self._attest(target, model, at, *op[1:])
            return
        mid = model.pick(op[1], movable=kind != "tombstone")
        if mid is None:
            return
        mm = model.memories[mid]
        ref = _ref(model, mid, op[2])
        here = cg.MemoryURI(ACTOR, mm.ns, mid)
        if kind == "update":
            self._update(target, model, mid, ref, at, *op[3:])
        elif kind == "head":
            latest = len(mm.versions)
            version = latest + 1 if op[3] % 5 == 0 else 1 + op[3] % latest  # or a missing one
            if mm.status == "tombstoned":
                with pytest.raises(cg.TombstonedError):
                    target.update_head(ref, version=version, at=at)
            elif version > len(mm.versions):
                with pytest.raises(cg.NotFoundError):
                    target.update_head(ref, version=version, at=at)
            else:
                assert target.update_head(ref, version=version, at=at) == here.at_version(version)
                if version != mm.head:
                    mm.head, mm.updated_at = version, at
                    model.log.append(("head", mm.ns, mid, at, version))
        else:
            reason = op[3]
            if mm.status == "tombstoned":
                with pytest.raises(cg.TombstonedError):
                    target.tombstone(ref, reason=reason, at=at)
            else:
                assert target.tombstone(ref, reason=reason, at=at) == here.at_version(mm.head)
                mm.status, mm.updated_at = "tombstoned", at
                model.log.append(("tombstone", mm.ns, mid, at, reason))

    def _write(
        self, target: Any, model: Model, memory: cg.Memory, ns: str, at: int, *,
        plain: bool = False,
    ) -> bytes | None:
        if isinstance(memory, cg.Attest) and model.memories:  # cite what exists
            cited = [cg.MemoryURI(ACTOR, mm.ns, mid, mm.head) for mid, mm in
                     list(model.memories.items())[-2:]]
            memory = attrs.evolve(memory, cited=[str(uri) for uri in cited])
        if isinstance(memory, cg.LearnWeights) or (
            isinstance(memory, cg.Attest) and not model.memories
        ):  # a LearnWeights only comes from attest(); an Attest must cite this store
            with pytest.raises(cg.ValidationError):
                target.write(memory, ns=ns, at=at)
            return None
        uri = target.write(memory, ns=ns, at=at)
        assert (uri.actor, uri.ns, uri.version) == (ACTOR, ns, 1)
        assert uri.id not in model.memories
        model.memories[uri.id] = ModelMemory(
            ns, [(memory, model.next_seq, at)], updated_at=at, plain=plain
        )
        model.log.append(("write", ns, uri.id, at, memory))
        assert target.resolve(uri).memory == memory  # read-your-writes, also in a batch
        return uri.id

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
        current = mm.memory
        if mode == "identical":
            changes = {name: getattr(current, name) for name in changes}
        elif "confidence" in changes and abs(changes["confidence"] - 0.3) < 0.01:
            changes["confidence"] = 0.5  # away from the archive threshold
        expected_version = None
        if expect == "right":
            expected_version = mm.head
        elif expect == "stale":
            expected_version = mm.head + stale_delta
            if expected_version < 1:
                expected_version = mm.head + 1
        if mm.status == "tombstoned":
            with pytest.raises(cg.TombstonedError):
                target.update(ref, expected_version=expected_version, at=at, **changes)
            return
        if isinstance(current, cg.LearnWeights):
            with pytest.raises(cg.ValidationError):
                target.update(ref, expected_version=expected_version, at=at, **changes)
            return
        if expect == "stale":
            with pytest.raises(cg.VersionConflictError):
                target.update(ref, expected_version=expected_version, at=at, **changes)
            return
        new = attrs.evolve(current, **changes)
        uri = target.update(ref, expected_version=expected_version, at=at, **changes)
        here = cg.MemoryURI(ACTOR, mm.ns, mid)
        if new == current:
            assert uri == here.at_version(mm.head)  # nothing journaled
            return
        version = len(mm.versions) + 1
        assert uri == here.at_version(version)
        mm.versions.append((new, model.next_seq, at))
        mm.head, mm.updated_at = version, at
        model.log.append(("update", mm.ns, mid, at, version, new))

    def _add_edge(
        self, target: Any, model: Model, at: int, i: int, j: int, relation: str,
        strength: float, status: str, origin: str, form: str,
    ) -> None:
        src, dst = model.pick(i), model.pick(j)
        if src is None or dst is None:
            return
        rel = ALIASES.get(relation)
        a, b = model.memories[src], model.memories[dst]
        if rel == "relates_to" and status == "suggested" and strength >= 0.5 and not (
            a.plain and b.plain
        ):
            strength = 0.45  # a consolidation candidate only between memories of known terms
        call = lambda: target.add_edge(  # noqa: E731
            _ref(model, src, form), _ref(model, dst, form), relation,
            strength=strength, status=status, origin=origin, at=at,
        )
        error: type[cg.CortexError] | None = None
        if rel is None or src == dst:
            error = cg.ValidationError
        elif "tombstoned" in (a.status, b.status):
            error = cg.TombstonedError
        elif strength > 1.0 or status not in ("active", "suggested") or (
            rel == "supersedes" and origin != "human"
        ):
            error = cg.ValidationError
        if error is not None:
            with pytest.raises(error):
                call()
            return
        assert rel is not None
        edge = call()
        stored = model.put_edge(src, rel, dst, round(strength * PPM), status, origin, at)
        assert edge == cg.Edge(
            src=cg.MemoryURI(ACTOR, a.ns, src), dst=cg.MemoryURI(ACTOR, b.ns, dst),
            relation=rel, strength=stored.ppm / PPM, status=stored.status,
            origin=stored.origin, at=stored.at, seq=stored.seq,
        )

    def _remove_edge(
        self, target: Any, model: Model, at: int, i: int, j: int, relation: str, form: str
    ) -> None:
        if model.edges and i % 3:
            src, rel, dst = list(model.edges)[j % len(model.edges)]
            relation = relation if ALIASES.get(relation) == rel else rel
        else:
            src, dst = model.pick(i), model.pick(j)  # type: ignore[assignment]
            if src is None or dst is None:
                return
        rel = ALIASES.get(relation)  # type: ignore[assignment]
        call = lambda: target.remove_edge(  # noqa: E731
            _ref(model, src, form), _ref(model, dst, form), relation, at=at
        )
        statuses = (model.memories[src].status, model.memories[dst].status)
        if rel is None or src == dst:
            error: type[cg.CortexError] | None = cg.ValidationError
        elif "tombstoned" in statuses:
            error = cg.TombstonedError
        elif (src, rel, dst) not in model.edges:
            error = cg.NotFoundError
        else:
            error = None
        if error is not None:
            with pytest.raises(error):
                call()
            return
        assert call() is None
        model.drop_edge(src, rel, dst, at)

    def _attest(
        self, target: Any, model: Model, at: int, picks: list[int], outcome: str, text: str,
        ns: str, form: str,
    ) -> None:
        cited = [mid for mid in (model.pick(i) for i in picks) if mid is not None]
        refs = [_ref(model, mid, form) for mid in cited]
        if not refs or outcome not in OUTCOMES:
            with pytest.raises(cg.ValidationError):
                target.attest(refs, outcome=outcome, text=text, ns=ns, at=at)
            return
        result = target.attest(refs, outcome=outcome, text=text, ns=ns, at=at)
        pinned: dict[bytes, cg.MemoryURI] = {}
        for mid in cited:
            mm = model.memories[mid]
            version = len(mm.versions) if form == "pinned" else mm.head
            pinned.setdefault(mid, cg.MemoryURI(ACTOR, mm.ns, mid, version))
        attest = cg.Attest(text=text, cited=[str(u) for u in pinned.values()], outcome=outcome)
        assert result.before == model.weights
        after = tuple(result.after)
        assert sum(after) == PPM and min(after) >= 20_000, after  # documented bounds
        learn = cg.LearnWeights(weights=after, attest=str(result.attest))
        for uri, memory in ((result.attest, attest), (result.learn, learn)):
            assert (uri.actor, uri.ns, uri.version) == (ACTOR, ns, 1)
            model.memories[uri.id] = ModelMemory(ns, [(memory, model.next_seq, at)], updated_at=at)
            model.log.append(("write", ns, uri.id, at, memory))
        model.weights = after

    # -- rules --------------------------------------------------------------------------

    @initialize(op=writes)
    def first_write(self, op: tuple[Any, ...]) -> None:
        self._run(self.cx, self.model, op)

    @rule(op=writes)
    def write(self, op: tuple[Any, ...]) -> None:
        seq = self.cx.seq
        self._run(self.cx, self.model, op)
        self._changed("write", seq)

    @precondition(lambda self: self.model.memories)
    @rule(op=updates)
    def update(self, op: tuple[Any, ...]) -> None:
        seq = self.cx.seq
        log_size = len(self.model.log)
        self._run(self.cx, self.model, op)
        assert self.cx.seq - seq == len(self.model.log) - log_size  # no entry when unchanged
        self._changed("update", seq)

    @precondition(lambda self: self.model.memories)
    @rule(op=head_moves)
    def update_head(self, op: tuple[Any, ...]) -> None:
        seq = self.cx.seq
        self._run(self.cx, self.model, op)
        self._changed("update_head", seq)

    @precondition(lambda self: self.model.memories)
    @rule(op=tombstones)
    def tombstone(self, op: tuple[Any, ...]) -> None:
        seq = self.cx.seq
        self._run(self.cx, self.model, op)
        self._changed("tombstone", seq)

    @precondition(lambda self: len(self.model.memories) > 1)
    @rule(op=edge_adds)
    def add_edge(self, op: tuple[Any, ...]) -> None:
        seq = self.cx.seq
        self._run(self.cx, self.model, op)
        self._changed("add_edge", seq)

    @precondition(lambda self: self.model.edges)
    @rule(op=edge_removals)
    def remove_edge(self, op: tuple[Any, ...]) -> None:
        seq = self.cx.seq
        self._run(self.cx, self.model, op)
        self._changed("remove_edge", seq)

    @precondition(lambda self: self.model.memories)
    @rule(op=attests)
    def attest(self, op: tuple[Any, ...]) -> None:
        seq = self.cx.seq
        self._run(self.cx, self.model, op)
        self._changed("attest", seq)

    @rule(
        words=st.lists(st.sampled_from(WORDS), min_size=2, max_size=4, unique=True),
        kind=st.sampled_from(["twin", "twin", "near", "apart"]),
        tags=st.tuples(*[st.lists(st.sampled_from(WORDS[:3]), max_size=2, unique=True)] * 2),
        priorities=st.tuples(st.sampled_from([5, 7]), st.sampled_from([5, 7])),
        other_ns=st.sampled_from([False, False, False, True]),
        strength=st.sampled_from([0.5, 0.8, 1.0]),
    )
    def pair(self, words: list[str], kind: str, tags: tuple[list[str], list[str]],
             priorities: tuple[int, int], other_ns: bool, strength: float) -> None:
        """Two plain Facts and a suggested ``relates_to`` between them: a consolidation
        candidate whose similarity the model knows (equal, near or disjoint words)."""
        if kind == "twin":
            second = list(words)
        elif kind == "near":
            second = [*words[1:], next(w for w in WORDS if w not in words)]
        else:
            second = [w for w in WORDS if w not in words][: len(words)]
        facts = [
            cg.Fact(text=" ".join(w), tags=t, confidence=0.9, priority=p)
            for w, t, p in zip((words, second), tags, priorities, strict=True)
        ]
        seq = self.cx.seq
        with self.cx.batch() as b:
            ids = [
                self._write(b, self.model, fact, ns, self._tick(), plain=True)
                for fact, ns in zip(facts, ("default", "work" if other_ns else "default"),
                                    strict=True)
            ]
            src, dst = ids
            assert src is not None and dst is not None
            at = self._tick()
            b.add_edge(src, dst, "related", strength=strength, status="suggested", at=at)
            self.model.put_edge(src, "relates_to", dst, round(strength * PPM), "suggested",
                                "system", at)
        self._changed("pair", seq)

    @rule(
        ops=st.lists(any_op, min_size=1, max_size=5),
        ending=st.sampled_from(["commit", "commit", "abort", "bad verb", "caught bad verb"]),
        bad=bad_verbs,
        where=st.integers(0, 5),
    )
    def batch(self, ops: list[tuple[Any, ...]], ending: str, bad: str, where: int) -> None:
        """A batch of ops that commits; or aborts by a user exception at its end; or runs
        an invalid verb after the first ``where`` ops, which rolls everything back when
        it propagates, and leaves the batch usable when it is caught."""
        trial = self.model.copy()
        seq, root = self.cx.seq, self.cx.overall_root()

        class Abort(Exception):
            pass

        failing = ending in ("bad verb", "caught bad verb")
        try:
            with self.cx.batch() as b:
                for n, op in enumerate(ops):
                    if failing and n == where % len(ops):
                        self._bad_verb(b, trial, bad, caught=ending == "caught bad verb")
                    self._run(b, trial, op)
                if ending == "abort":
                    raise Abort
        except (Abort, cg.CortexError) as exc:
            assert ending in ("abort", "bad verb"), exc
            event(f"batch: {ending}")
            assert (self.cx.seq, self.cx.overall_root()) == (seq, root)  # rolled back whole
        else:
            assert ending in ("commit", "caught bad verb")
            event(f"batch: {ending}, {'journaled' if self.cx.seq > seq else 'nothing'}")
            self.model = trial

    def _bad_verb(self, b: Any, model: Model, bad: str, *, caught: bool) -> None:
        mid = model.pick(0)
        if mid is None:
            mid_ref: Any = cg.MemoryURI(ACTOR, "default", b"\x01" * 16)
        else:
            mid_ref = cg.MemoryURI(ACTOR, model.memories[mid].ns, mid)
        def verb() -> None:
            if bad == "self-edge":
                b.add_edge(mid_ref, mid_ref, "relates_to")
            elif bad == "strength":
                b.add_edge(mid_ref, mid_ref, "relates_to", strength=2.0)
            elif bad == "unknown-field":
                b.update(mid_ref, colour="blue")
            else:
                b.write(cg.LearnWeights(weights=DEFAULT_WEIGHTS, attest=""))
        if caught:
            with pytest.raises(cg.CortexError):
                verb()
        else:
            verb()

    @precondition(lambda self: self.model.memories)
    @rule(index=st.integers(0, 1000), archived=st.booleans())
    def find_late_binding(self, index: int, archived: bool) -> None:
        """``find(late_binding=True)`` returns every match (the limit is above the store's
        size) and journals an access of each, restoring archived ones. The type is that
        of a memory the model holds (archived ones first when asked for), so that the
        read usually finds something."""
        held = [mm for mm in self.model.memories.values() if mm.status == "archived"]
        if not archived or not held:
            held = list(self.model.memories.values())
        type_name = held[index % len(held)].memory.type_name
        if type_name not in _TYPES:
            return
        at = self._tick()
        where = cg.Q.type(_TYPES[type_name])
        status = "archived" if archived else "active"
        if archived:
            where = where & cg.Q.status("archived")
        expected = {
            mid for mid, mm in self.model.memories.items()
            if mm.memory.type_name == type_name and mm.status == status
        }
        seq = self.cx.seq
        result = self.cx.find(where, limit=10_000, late_binding=True, now=at)
        assert {hit.uri.id for hit in result} == expected
        for hit in result:
            mm = self.model.memories[hit.uri.id]
            assert hit.uri == cg.MemoryURI(ACTOR, mm.ns, hit.uri.id, mm.head)
        self.model.access(sorted(expected), at)
        self._changed(f"find {status}", seq)

    @precondition(lambda self: self.model.memories)
    @rule(index=st.integers(0, 1000))
    def recall_late_binding(self, index: int) -> None:
        """Keyword recall with ``late_binding=True``: the hits (as returned) are journaled
        as accessed, and every hit is an active memory of the model."""
        mid = self.model.pick(index)
        assert mid is not None
        text = self.model.memories[mid].memory.text
        if not text.strip():
            return
        at = self._tick()
        seq = self.cx.seq
        result = self.cx.recall(text, k=5, mode="keyword", late_binding=True, now=at)
        hits = [hit.uri.id for hit in result]
        assert all(self.model.memories[h].status == "active" for h in hits)
        self.model.access(hits, at)
        self._changed("recall", seq)

    @rule(jump=st.sampled_from([0, JUMP]))
    def compact(self, jump: int) -> None:
        """``compact(now)`` after ``jump`` ms: the model predicts every archive, prune,
        merge and weakened candidate (see the module doc for why that is exact)."""
        self.now += jump
        now = self._tick()
        model = self.model
        seq = self.cx.seq
        archive, prune = [], []
        for mid, mm in model.memories.items():
            if mm.memory.pinned or model.hub(mid):
                continue
            if mm.status == "active" and now - max(mm.last_access, mm.head_at) >= 14 * DAY:
                decays = mm.memory.type_name in DECAYING
                if decays or round(mm.memory.confidence * PPM) < 300_000:
                    archive.append(mid)
            elif mm.status == "archived" and (
                now - max(mm.updated_at, mm.last_access, mm.head_at) >= 30 * DAY
            ):
                prune.append(mid)
        decisions = []
        candidates = sorted(
            (src, dst) for (src, rel, dst), e in model.edges.items()
            if rel == "relates_to" and e.status == "suggested" and e.ppm >= 500_000
        )
        for src, dst in candidates:
            a, b = model.memories[src], model.memories[dst]
            if a.status != "active" or b.status != "active":
                continue
            if a.ns != b.ns or a.memory.type_name != b.memory.type_name:
                continue
            if a.memory.type_name not in MERGEABLE:
                continue
            assert a.plain and b.plain  # the only candidates this machine makes
            ta, tb = a.terms(), b.terms()
            similarity = len(ta & tb) * PPM // len(ta | tb)
            if similarity >= 700_000:
                decisions.append(("merge", src, dst))
            elif similarity < 500_000:
                decisions.append(("weaken", src, dst, similarity))
        # the archives come first, then the prunes; within each group the order is the
        # store's (its column index's), which nothing documents: it is taken from the
        # report below, after checking that the sets agree
        moves = len(model.log)
        for mid in archive:
            model.set_status(mid, "archived", now)
        for mid in prune:
            model.set_status(mid, "pruned", now)
        merged = []
        done: set[bytes] = set()
        for decision in decisions:
            src, dst = decision[1], decision[2]
            if decision[0] == "weaken":
                model.put_edge(src, "relates_to", dst, decision[3], "suggested", "system", now)
                continue
            survivor, other = sorted((src, dst), key=lambda m: self._survivor_key(m))
            if survivor in done or other in done:
                continue
            done.update((survivor, other))
            keep, gone = model.memories[survivor], model.memories[other]
            changes: dict[str, Any] = {}
            tags = tuple(sorted(set(keep.memory.tags) | set(gone.memory.tags)))
            if tags != tuple(keep.memory.tags):
                changes["tags"] = tags
            for name in ("confidence", "priority"):
                if getattr(gone.memory, name) > getattr(keep.memory, name):
                    changes[name] = getattr(gone.memory, name)
            if changes:
                new = attrs.evolve(keep.memory, **changes)
                keep.versions.append((new, model.next_seq, now))
                keep.head = len(keep.versions)
                keep.updated_at = now
                model.log.append(("update", keep.ns, survivor, now, keep.head, new))
            model.put_edge(survivor, "derived_from", other, PPM, "active", "system", now)
            model.set_status(other, "merged", now)
            model.drop_edge(src, "relates_to", dst, now)
            merged.append((cg.MemoryURI(ACTOR, keep.ns, survivor, keep.head),
                           cg.MemoryURI(ACTOR, gone.ns, other, gone.head)))
        report = self.cx.compact(now=now)
        here = {mid: cg.MemoryURI(ACTOR, mm.ns, mid, mm.head) for mid, mm in model.memories.items()}
        assert sorted(map(str, report.archived)) == sorted(str(here[m]) for m in archive)
        assert sorted(map(str, report.pruned)) == sorted(str(here[m]) for m in prune)
        order = [uri.id for uri in (*report.archived, *report.pruned)]
        rows = {row[2]: row for row in model.log[moves : moves + len(order)]}
        model.log[moves : moves + len(order)] = [rows[mid] for mid in order]
        assert list(report.merged) == merged
        event(f"compact: {len(archive)} archived" if archive else "compact: none archived")
        event(f"compact: {len(prune)} pruned" if prune else "compact: none pruned")
        event(f"compact: {len(merged)} merged" if merged else "compact: none merged")
        self._changed("compact", seq)

    def _survivor_key(self, mid: bytes) -> tuple[Any, ...]:
        """The documented survivor order: pinned, more read, more confident, more
        important, older, smaller id."""
        mm = self.model.memories[mid]
        m = mm.memory
        return (not m.pinned, -mm.accesses, -m.confidence, -m.priority, mm.versions[0][2], mid)

    @rule(jump=st.just(JUMP))
    def jump_and_compact(self, jump: int) -> None:
        """The same rule, always after a jump: archiving then pruning needs two."""
        self.compact(jump)

    @precondition(lambda self: len(self.model.memories) > 1)
    @rule(op=edge_adds)
    def add_another_edge(self, op: tuple[Any, ...]) -> None:
        """The same rule as ``add_edge`` (twice the weight: removals need edges)."""
        self.add_edge(op)

    @rule()
    def snapshot(self) -> None:
        """A snapshot records the current seq and root; a second one at the same seq
        returns the stored manifest."""
        at = self._tick()
        seq = len(self.model.log)
        manifest = self.cx.snapshot(at=at)
        root = self.cx.overall_root()
        first = self.model.snapshots.setdefault(seq, (at, root))
        event("snapshot: " + ("stored" if first == (at, root) else "already stored"))
        assert (manifest.seq, manifest.at, manifest.overall_root) == (seq, *first)
        assert manifest.actor == ACTOR

    @rule()
    def rebuild(self) -> None:
        """Dropping every derived table and replaying the journal changes nothing (J4)."""
        before = (self.cx.overall_root(), self.cx.table_digests())
        assert self.cx.rebuild() == len(self.model.log)
        assert (self.cx.overall_root(), self.cx.table_digests()) == before
        event("rebuild")

    @rule()
    def reopen(self) -> None:
        self.cx.close()
        self.cx = self._open()
        event("reopen")

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
    def edges_and_centrality_as_modelled(self) -> None:
        model = self.model
        highest = max((model.in_degree(m) for m in model.memories), default=0)
        for mid in model.memories:
            expected = sorted(
                (rel, dst, e.status, e.ppm, e.origin, e.at, e.seq)
                for (src, rel, dst), e in model.edges.items() if src == mid
            )
            seen = sorted(
                (e.relation, e.dst.id, e.status, round(e.strength * PPM), e.origin, e.at, e.seq)
                for e in self.cx.edges(mid)
            )
            assert seen == expected
            assert self.cx.centrality(mid) == (model.in_degree(mid) / highest if highest else 0.0)
        assert self.cx.weights() == model.weights

    @invariant()
    def journal_replays_the_model_log(self) -> None:
        entries = list(self.cx.journal())
        assert [e.seq for e in entries] == list(range(1, len(self.model.log) + 1))
        seen = []
        for entry in entries:
            f = entry.fields
            if entry.op == "access":
                seen.append(("access", entry.ns, None, entry.at, tuple(f["ids"])))
                continue
            row: tuple[Any, ...] = (entry.op, entry.ns, entry.memory_id, entry.at)
            if entry.op == "write":
                row += (memory_from_body(f["body"]),)
            elif entry.op == "update":
                row += (f["version"], memory_from_body(f["body"]))
            elif entry.op == "head":
                row += (f["version"],)
            elif entry.op == "tombstone":
                row += (f.get("reason", ""),)
            elif entry.op == "status":
                row += (f["status"],)
            elif entry.op == "edge":
                row += (f["dst"], f["rel"], f["strength"], f["status"], f["origin"])
            else:
                row += (f["dst"], f["rel"])
            seen.append(row)
        assert seen == self.model.log

    @invariant()
    def roots_commit_to_the_journal(self) -> None:
        """The MMR root is the RFC 6962 hash of the journal's bytes, and the OverallRoot
        is ``H("cortexgraph/root/v1" | u64be(size) | mmr_root | smt_root)``; every stored
        snapshot is the model's."""
        leaves = [_leaf(data) for _, data in self.cx.journal_bytes()]
        manifest = self.cx.roots()
        assert manifest.seq == len(leaves) == len(self.model.log)
        assert manifest.mmr_root == _tree_hash(leaves)
        overall = blake3.blake3(
            b"cortexgraph/root/v1" + struct.pack(">Q", len(leaves))
            + manifest.mmr_root + manifest.smt_root
        ).digest()
        assert self.cx.overall_root() == manifest.overall_root == overall
        stored = {m.seq: (m.at, m.overall_root) for m in self.cx.snapshots()}
        assert stored == self.model.snapshots
        assert self.cx.stats().tables["emb"] == 0  # similarity stays Jaccard (module doc)


_TYPES = {cls.type_name: cls for cls in (cg.Fact, cg.Event, cg.Preference, cg.Goal,
                                          cg.Constraint, cg.Pattern, cg.ArtifactRef)}


class TestCortexMatchesModel(CortexMachine.TestCase):  # type: ignore[name-defined]
    """Random sequences of the whole write API (see the module doc) leave Cortex agreeing
    with the dict model after every step: resolve, history, edges, centrality, weights,
    seq, the journal, the roots and the stored snapshots (J1, J3, J4, J5)."""

    settings = settings(max_examples=100, stateful_step_count=50, deadline=None)
