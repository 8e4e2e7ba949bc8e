"""Scopes for sub-agents: ``Cortex.scope`` exports a proof-checked slice, and
:func:`verify_scope` checks one without any database and returns a read-only
:class:`ScopeView` with ``find``, keyword ``recall`` and ``context`` over the slice.

The bundle format and what verification checks are in ``core/bundle.py`` (SC1-SC5).
Inside a scope, ranking uses what the slice proves: confidence, priority, recency, and
centrality within the slice's own edges; access history and learned weights are not part of
a bundle, so frequency is 0 and the weights are the defaults.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import attrs

from .context import ContextBundle
from .core.bundle import VerifiedScope, encode_scope, verify_scope_bytes
from .core.commitments import edge_smt_key, mmr_getter, roots, smt_getter
from .core.forms import TokenEstimator, estimate_tokens, render
from .core.fusion import RECALL_BM25
from .core.graph import OUT
from .core.keys import seq_key, version_key
from .core.mmr import mmr_inclusion_proof
from .core.packing import ContextItem, pack_context
from .core.postings import index_text
from .core.predicates import MemoryAttrs, Predicate, matches
from .core.query import check_not_too_broad, to_dnf
from .core.salience import DEFAULT_WEIGHTS, cold_score, salience_factors
from .core.smt import smt_key
from .core.smt_store import smt_store_prove
from .core.state import HeadState, Record
from .core.text import bm25_scores, term_counts
from .core.uri import MemoryURI
from .errors import CortexError, NotFoundError, ValidationError, VerificationError
from .find import FindResult, Hit, check_find_arguments, check_tokens, run_find
from .handle import Handle
from .reading import MemoryRef
from .signing import SigningKey, VerifierKey, sign_checkpoint, verify_checkpoint
from .trust import prove_consistency

__all__ = ["ScopeView", "export_scope", "verify_scope"]

MAX_SCOPE_MEMORIES = 10_000
_EXCLUDED_TYPES = ("attest", "learn_weights")


def export_scope(
    h: Handle, where_or_uris: Predicate | Iterable[MemoryRef], *, limit: int,
    include_edges: bool, sign_with: SigningKey | None = None, prove_from: int | None = None,
) -> bytes:
    """Carry out :meth:`Cortex.scope`."""
    if sign_with is not None and type(sign_with) is not SigningKey:
        raise ValidationError("must be a cortexgraph.SigningKey", field="sign_with")
    if prove_from is not None and (type(prove_from) is not int or prove_from < 0):
        raise ValidationError("must be a non-negative integer (a seq)", field="prove_from")
    if type(limit) is not int or not 1 <= limit <= MAX_SCOPE_MEMORIES:
        raise ValidationError(f"must be an integer in 1..{MAX_SCOPE_MEMORIES}", field="limit")
    if type(include_edges) is not bool:
        raise ValidationError("must be True or False", field="include_edges")
    if isinstance(where_or_uris, Predicate):
        found = run_find(
            h,
            where_or_uris,
            limit=limit,
            budget_tokens=None,
            order_by="salience",
            form="short",
            late_binding=False,
            now=None,
            estimator=None,
        )
        ids = [uri.id for uri in found.uris]
    elif isinstance(where_or_uris, (str, bytes, MemoryURI)) or not isinstance(
        where_or_uris, Iterable
    ):
        raise ValidationError("must be a Q predicate or a list of memory URIs", field="where")
    else:
        refs = list(where_or_uris)
        if len(refs) > limit:
            raise ValidationError(f"{len(refs)} memories is more than limit={limit}",
                                  field="limit")
        ids = list(dict.fromkeys(h.parse_ref(ref, allow_id=True).id for ref in refs))
    hash_name = h.hash_name
    with h.env.read() as txn:
        size = txn.last_seq()
        mmr, smt, root = roots(hash_name, txn.get, size)
        getter = smt_getter(txn.get)
        records = []
        for memory_id in ids:
            raw = txn.get("heads", memory_id)
            if raw is None:
                raise NotFoundError(f"no memory {memory_id.hex()}")
            head = HeadState.decode(raw)
            version = txn.get("versions", version_key(memory_id, head.head))
            if version is None:
                raise NotFoundError(f"memory {memory_id.hex()} has no head version")
            proof = smt_store_prove(hash_name, getter, smt_key(hash_name, head.ns, memory_id))
            records.append({"id": memory_id, "head": bytes(raw), "version": bytes(version),
                            "proof": proof})
        edges = []
        if include_edges:
            wanted = set(ids)
            for memory_id in ids:
                for key, value in txn.iter_items("edges", OUT + memory_id):
                    if bytes(key[18:]) in wanted:
                        key = bytes(key)
                        proof = smt_store_prove(hash_name, getter, edge_smt_key(hash_name, key))
                        edges.append({"key": key, "record": bytes(value), "proof": proof})
        anchor = None
        if size:
            first = txn.get("journal", seq_key(1))
            path = mmr_inclusion_proof(hash_name, mmr_getter(txn.get), 0, size)
            anchor = {"entry": bytes(first or b""), "proof": list(path)}
    manifest = {"actor": h.actor, "hash_name": hash_name, "seq": size, "mmr_root": mmr,
                "smt_root": smt, "overall_root": root}
    if prove_from is not None and prove_from > size:
        raise ValidationError(f"{prove_from} is past the end of the journal ({size} entries)",
                              field="prove_from")
    consistency = None if prove_from is None else prove_consistency(h, prove_from, None)
    if consistency is not None and consistency.new_root != root:
        # a write landed between the two reads
        raise CortexError("the store changed while the scope was taken; take it again")
    checkpoint = None if sign_with is None else sign_checkpoint(sign_with, size, root)
    return encode_scope(
        manifest, anchor, records, edges, consistency=consistency, checkpoint=checkpoint
    )


class _Omitted(enum.Enum):
    """The default of ``trusted_root``: the caller did not say which root to trust."""

    OMITTED = enum.auto()


def verify_scope(
    blob: bytes,
    trusted_root: bytes | _Omitted | None = _Omitted.OMITTED,
    *,
    key: VerifierKey | None = None,
) -> ScopeView:
    """Check a scope bundle and return a read-only view of it. Needs no database.

    A bundle proves its records against its *own* roots; only a root you trust ties it
    to the store, since anyone can build a self-consistent bundle. So say which: the
    32-byte OverallRoot you got from the store's owner (``cx.overall_root()``), or the
    owner's verifier key, with which the bundle's signed checkpoint must verify, or
    ``None`` to knowingly check self-consistency only.

    A bundle whose root is newer than ``trusted_root`` verifies when it carries a
    consistency proof from ``trusted_root`` to its root (``cx.scope(..., prove_from=seq)``):
    the newer state's journal extends the one you trust.

    Args:
        blob: the bundle, as :meth:`Cortex.scope` returned it.
        trusted_root: the OverallRoot the bundle must commit to (or extend), or ``None``
            to skip that check; may be omitted when ``key`` is given.
        key: a :class:`~cortexgraph.VerifierKey` (the ``sign`` extra): the bundle must
            carry a checkpoint signed with it, and its root must be the checkpoint's.

    Raises:
        ValidationError: neither ``trusted_root`` nor ``key`` was given (field
            ``trusted_root``), or ``key`` is not a verifier key.
        VerificationError: anything that does not check out: a flipped bit, truncation,
            trailing bytes, a proof that does not match, a different trusted root, a
            missing checkpoint or one whose signature does not verify with ``key``.
    """
    if key is not None:
        return _verify_signed(blob, trusted_root, key)
    if trusted_root is _Omitted.OMITTED:
        raise ValidationError(
            "must be given: the 32-byte OverallRoot you trust (cx.overall_root() of the"
            " store), or None to check only that the bundle is self-consistent (anyone can"
            " build a self-consistent bundle, so that alone proves nothing about its origin)",
            field="trusted_root",
        )
    verified = verify_scope_bytes(blob, trusted_root)
    return ScopeView(**attrs.asdict(verified, recurse=False))


def _verify_signed(blob: bytes, trusted_root: object, key: VerifierKey) -> ScopeView:
    """:func:`verify_scope` with a verifier key: the bundle's checkpoint must verify with
    ``key``, and then its root is trusted (as well as ``trusted_root``, if given)."""
    if type(key) is not VerifierKey:
        raise ValidationError("must be a cortexgraph.VerifierKey", field="key")
    verified = verify_scope_bytes(
        blob, None if trusted_root is _Omitted.OMITTED else trusted_root
    )
    if verified.checkpoint is None:
        raise VerificationError("the scope bundle does not verify: it carries no checkpoint")
    try:
        verify_checkpoint(verified.checkpoint.note, key)
    except VerificationError as exc:
        raise VerificationError(f"the scope bundle does not verify: {exc}") from None
    # verify_scope_bytes tied the checkpoint's size and root to the manifest (SC7)
    return ScopeView(**attrs.asdict(verified, recurse=False))


@attrs.frozen
class ScopeView(VerifiedScope, Sequence[Record]):
    """A verified slice of a store: its records (head versions) and the edges among them
    (the fields of :class:`~cortexgraph.core.bundle.VerifiedScope`).

    Read-only: ``find``, ``recall`` (keyword) and ``context`` work as on a store, over the
    slice only (see the module doc for how ranking differs).
    """

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: Any) -> Any:
        return self.records[index]

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def _now(self, now: int | None) -> int:
        if now is None:
            return max((r.at for r in self.records), default=0)
        if type(now) is not int or now < 0:
            raise ValidationError("must be integer milliseconds since the epoch", field="now")
        return now

    def _in_degrees(self) -> dict[bytes, int]:
        counts: dict[bytes, int] = {}
        for edge in self.edges:
            if edge.status == "active":
                counts[edge.dst.id] = counts.get(edge.dst.id, 0) + 1
        return counts

    def _score(self, record: Record, degrees: dict[bytes, int], top: int, now: int) -> int:
        m = record.memory
        factors = salience_factors(
            type_name=m.type_name, confidence=m.confidence, priority=m.priority,
            pinned=m.pinned, in_degree=degrees.get(record.uri.id, 0), max_in_degree=top,
            access_count=0, max_access=0, age_ms=now - record.at,
        )
        return cold_score(factors, DEFAULT_WEIGHTS)

    def find(
        self, where: Predicate, *, limit: int | None = None, budget_tokens: int | None = None,
        order_by: str = "salience", form: str = "short", now: int | None = None,
        estimator: TokenEstimator | None = None,
    ) -> FindResult:
        """``Cortex.find`` over the slice (same guards, orders and forms). ``now``
        defaults to the latest write time in the slice, so a view ranks the same
        everywhere."""
        predicate, count = check_find_arguments(where, limit, budget_tokens, order_by, form,
                                                estimator)
        now = self._now(now)
        check_not_too_broad(to_dnf(predicate))
        degrees = self._in_degrees()
        top = max(degrees.values(), default=0)
        keyed = []
        for record in self.records:
            m = record.memory
            attrs_ = MemoryAttrs(type_name=m.type_name, ns=record.uri.ns, tags=m.tags,
                                 at=record.at, confidence=m.confidence, priority=m.priority,
                                 status=record.status, pinned=m.pinned)
            if not matches(predicate, attrs_):
                continue
            score = self._score(record, degrees, top, now)
            key = {"salience": score, "recent": record.at, "priority": m.priority,
                   "confidence": m.confidence}[order_by]
            keyed.append((-key, record.uri.id, record, score))
        keyed.sort(key=lambda item: (item[0], item[1]))
        hits: list[Hit] = []
        used = 0
        for _, _, record, score in keyed:
            if limit is not None and len(hits) >= limit:
                break
            text = render(record, form)
            tokens = check_tokens(count(text))
            if budget_tokens is not None and used + tokens > budget_tokens:
                break
            used += tokens
            hits.append(Hit(record.uri, record, text, tokens, score))
        return FindResult(tuple(hits), used, len(keyed), "scan of the scope", self.seq)

    def recall(self, text: str, *, k: int = 10) -> list[tuple[Record, float]]:
        """Keyword (BM25) recall over the slice's active memories, best first."""
        if type(text) is not str or not text.strip():
            raise ValidationError("must be a non-empty string", field="text")
        if type(k) is not int or k < 1:
            raise ValidationError("must be a positive integer", field="k")
        postings: dict[str, dict[bytes, int]] = {}
        lengths: dict[bytes, int] = {}
        by_id: dict[bytes, Record] = {}
        for record in self.records:
            if record.status != "active" or record.memory.type_name in _EXCLUDED_TYPES:
                continue
            counts = term_counts(index_text(record.memory))
            by_id[record.uri.id] = record
            lengths[record.uri.id] = sum(counts.values())
            for term, tf in counts.items():
                postings.setdefault(term, {})[record.uri.id] = tf
        if not lengths:
            return []
        avg = sum(lengths.values()) / len(lengths) or 1.0
        scores = bm25_scores(list(term_counts(text)), postings, lengths, len(lengths), avg,
                             RECALL_BM25)
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
        return [(by_id[memory_id], score) for memory_id, score in ranked]

    def context(
        self, *, query: str | None = None, budget_tokens: int, now: int | None = None,
        estimator: TokenEstimator | None = None,
    ) -> Any:
        """A context bundle packed from the slice: the floor (pinned memories, Goals,
        Constraints, Preferences, then the most salient Facts), the keyword recall of
        ``query`` as the foreground, the rest as one-line background."""
        now = self._now(now)
        degrees = self._in_degrees()
        top = max(degrees.values(), default=0)
        live = [r for r in self.records
                if r.status == "active" and r.memory.type_name not in _EXCLUDED_TYPES]
        ranked = sorted(live, key=lambda r: (-self._score(r, degrees, top, now), r.uri.id))
        items: list[ContextItem] = []
        placed: set[bytes] = set()

        def add(record: Record, layer: str) -> None:
            if record.uri.id not in placed:
                placed.add(record.uri.id)
                items.append(ContextItem(uri=str(record.uri), type_name=record.memory.type_name,
                                         layer=layer, rank=len(items), record=record))

        for record in ranked:
            m = record.memory
            floor = m.pinned or m.type_name in ("constraint", "preference") or (
                m.type_name == "goal" and getattr(m, "status", "") == "active")
            if floor:
                add(record, "floor")
        for record in [r for r in ranked if r.memory.type_name == "fact"][:5]:
            add(record, "floor")
        if query is not None:
            for record, _ in self.recall(query, k=20):
                add(record, "foreground")
        for record in ranked:
            add(record, "background")
        packed = pack_context(items, budget_tokens, estimator=estimator or estimate_tokens)
        by_uri = {str(r.uri): r.uri for r in live}
        return ContextBundle(
            text=packed.text,
            items=tuple((by_uri[u], layer, form) for u, layer, form in packed.items),
            tokens=packed.tokens,
            digest=packed.digest,
        )
