"""``ChatMemory``: one session over every channel of a chat runtime, on a cortexgraph store.

Everything lives in one namespace (``chat`` by default) of an open :class:`Cortex`:

- **messages**: one ``Event`` per message, ``channel`` set, ``kind`` the role, ``speaker``
  the sender, ``occurred_at`` and the journal time the message's time, tagged
  ``chat-message`` and ``ch-<channel>``; the caller's metadata is the ``summary``, as
  canonical JSON. The journal seq is the session's strict order.
- **channel state**: one ``Event`` of kind ``channel-state`` per channel, tagged
  ``chat-channel``, whose text is the state as canonical JSON (last message time, unread
  count, one-line summary, layer); it is updated in the same batch as each message.
- **inbound queue**: one ``Event`` of kind ``inbound`` per envelope (the envelope as
  canonical JSON), tagged ``chat-queue``, ``queue-<state>`` and ``tier-<priority>``;
  attempts and the last error are its ``summary``. See :mod:`.queue`.

A ``ChatMemory`` keeps the channel states and the live queue items in memory, loaded once
when it is made, so it must be the only writer of its namespace while it is open. Reading a
channel's recent messages goes through the index by recency with a limit, so the cost of
the foreground window does not grow with the history.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

import cortexgraph as cg
from cortexgraph.core.predicates import Predicate
from cortexgraph.errors import NotFoundError, ValidationError
from cortexgraph.integrations.chat.layers import ChatContext, ChatMessage
from cortexgraph.integrations.chat.operations import OperationLog
from cortexgraph.integrations.chat.queue import QueueItem, QueueState
from cortexgraph.integrations.chat.values import (
    FACT_TAG,
    canonical_json,
    check_channel,
    check_ms,
    check_text,
)

__all__ = ["ARCHIVE_AFTER_MS", "ChannelState", "ChatMemory", "ROLES"]

ROLES = ("user", "assistant", "tool_use", "tool_result")
LAYERS = ("foreground", "background", "archived")
#: A channel idle for longer than this is archived: out of every context.
ARCHIVE_AFTER_MS = 24 * 3600 * 1000
#: The foreground's soft caps.
FOREGROUND_MESSAGES = 20
FOREGROUND_TOKENS = 4000
#: How many known facts the system floor holds at most.
KNOWN_FACTS = 50
SUMMARY_CHARS = 100
# Messages that share one millisecond are read together when a window is cut among them.
_SAME_MS_LIMIT = 1000
_STATE_LIMIT = 100_000
MESSAGE_TAG = "chat-message"
CHANNEL_TAG = "chat-channel"
IDENTITY_TAG = "identity"
#: What the chat memory knows, besides its messages: the types ``remember`` writes.
KNOWLEDGE_TYPES = {
    "fact": "Fact",
    "preference": "Preference",
    "constraint": "Constraint",
    "pattern": "Pattern",
    "goal": "Goal",
}
#: Hot facts are ranked among this many of the most salient (salience weighs access
#: frequency and recency, so the hottest are among them).
HOT_POOL = 500
#: Cold recall compares the query with this many of the most recently archived facts, and
#: keeps those at least this similar.
COLD_POOL = 2000
COLD_MIN_COSINE = 0.2


def knowledge(ns: str) -> Predicate:
    """The knowledge of namespace ``ns``: every memory of a ``remember`` type that is not
    an identity document."""
    types = cg.Q.any_of(*(cg.Q.type(name) for name in KNOWLEDGE_TYPES))
    return types & cg.Q.ns(ns) & ~cg.Q.tag(IDENTITY_TAG)


@attrs.frozen
class ChannelState:
    """What the runtime knows about a channel.

    Attributes:
        channel: its name.
        last_message_at: the time of its last message (ms).
        unread: user messages since the last assistant message (or ``mark_read``).
        summary: one line: the compactor's summary, or the last message.
        layer: ``foreground`` or ``background`` as stored; see :meth:`layer_at`.
    """

    channel: str
    last_message_at: int
    unread: int
    summary: str
    layer: str

    def layer_at(self, now: int) -> str:
        """The layer at ``now``: ``archived`` when idle longer than 24 hours."""
        if now - self.last_message_at > ARCHIVE_AFTER_MS:
            return "archived"
        return self.layer

    def to_json(self) -> str:
        return canonical_json(attrs.asdict(self))


def channel_tag(channel: str) -> str:
    return "ch-" + channel


def format_time(ms: int) -> str:
    """``YYYY-MM-DD HH:MM UTC`` for a time in ms (pure: no clock is read)."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ms // 1000))


def _check_metadata(role: str, metadata: object) -> dict[str, Any]:
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, Mapping) or any(type(k) is not str for k in metadata):
        raise ValidationError("must be a mapping with string keys", field="metadata")
    meta = dict(metadata)
    try:
        text = canonical_json(meta)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"must be JSON-serialisable ({exc})", field="metadata") from None
    if len(text) > 1024:
        raise ValidationError("must be at most 1,024 characters as JSON", field="metadata")
    needs = {"tool_use": ("id", "name"), "tool_result": ("tool_use_id",)}.get(role, ())
    for key in needs:
        if type(meta.get(key)) is not str or not meta[key]:
            raise ValidationError(f"a {role} message needs a string {key!r}", field="metadata")
    return meta


class ChatMemory:
    """The memory of a multi-channel chat runtime. See the module docstring for the layout.

    Making one loads the channel states, the live queue items and the live operations,
    puts back to ``pending`` every queue item a crashed run left ``processing``, and fails
    the operations it left pending (the start-up cleanup), journaled at ``now``.

    Args:
        cx: an open, writable store.
        ns: the namespace everything is kept in.
        now: the time of the start-up recovery (ms; default: the store's clock).
        max_attempts: how many times an envelope is handed out before ``fail`` gives up.
        recover: run the start-up recovery and cleanup (the runtime's own handle). False
            only reads, for a look at the state from another process (a read-only
            handle, the CLI) while the runtime may be running.
    """

    def __init__(
        self,
        cx: cg.Cortex,
        *,
        ns: str = "chat",
        now: int | None = None,
        max_attempts: int = 3,
        recover: bool = True,
    ) -> None:
        if type(max_attempts) is not int or max_attempts < 1:
            raise ValidationError("must be a positive integer", field="max_attempts")
        self.cx = cx
        self.ns = ns
        self.max_attempts = max_attempts
        self._channels: dict[str, tuple[cg.MemoryURI, ChannelState]] = {}
        for hit in cx.find(
            cg.Q.tag(CHANNEL_TAG) & cg.Q.ns(ns), limit=_STATE_LIMIT, order_by="recent"
        ):
            state = ChannelState(**json.loads(hit.record.memory.text))
            self._channels[state.channel] = (hit.record.uri, state)
        self._queue: dict[str, QueueItem] = {}
        live = cg.Q.tag("queue-pending") | cg.Q.tag("queue-processing")
        for hit in cx.find(live & cg.Q.ns(ns), limit=_STATE_LIMIT, order_by="recent"):
            first = cx.resolve(cg.MemoryURI.parse(f"{hit.record.uri.head}@1"))
            item = QueueItem.from_record(hit.record, first.seq)
            self._queue[item.id] = item
        at = cx.clock.now_ms() if now is None else check_ms(now, "now")
        #: The pending operations (see :mod:`.operations`).
        self.operations = OperationLog(cx, ns)
        if type(recover) is not bool:
            raise ValidationError("must be True or False", field="recover")
        if not recover:
            return
        self.operations.cleanup(at=at)
        stuck = [item for item in self._queue.values() if item.state == "processing"]
        if stuck:
            with cx.batch() as batch:
                changed = [self._queue_put(batch, item, "pending", at) for item in stuck]
            self._queue.update((item.id, item) for item in changed)

    def _time(self, value: int | None, field: str) -> int:
        """``value`` checked as a time in ms, or the store's clock when it is None."""
        return self.cx.clock.now_ms() if value is None else check_ms(value, field)

    # -- messages ---------------------------------------------------------------------

    def append(
        self,
        channel: str,
        role: str,
        sender: str,
        content: str,
        at: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> ChatMessage:
        """Record one message on ``channel``; it updates the channel's state.

        Args:
            channel: the channel (see :func:`check_channel`).
            role: ``user``, ``assistant``, ``tool_use`` or ``tool_result``.
            sender: who said it.
            content: the text; for ``tool_use`` the tool input as a JSON object.
            at: when it was said (ms). Messages are ordered by ``at``, then by the order
                they were appended.
            metadata: JSON-serialisable data kept with the message (at most 1,024
                characters as JSON); ``tool_use`` needs ``id`` and ``name``,
                ``tool_result`` needs ``tool_use_id``.

        Returns:
            The message as recorded.

        Raises:
            ValidationError: a bad argument, named by its field; nothing is written.
        """
        return self.append_many([(channel, role, sender, content, at, metadata)])[0]

    def append_many(
        self,
        messages: Iterable[
            tuple[str, str, str, str, int, Mapping[str, Any] | None]
        ],
    ) -> list[ChatMessage]:
        """Record several messages in one batch (all or none), in the order given; each
        tuple holds :meth:`append`'s arguments."""
        checked = [self._check_message(*message) for message in messages]
        states: dict[str, tuple[cg.MemoryURI | None, ChannelState]] = dict(self._channels)
        written: list[tuple[cg.MemoryURI, Any]] = []
        with self.cx.batch() as batch:
            for channel, memory, meta in checked:
                uri = batch.write(memory, ns=self.ns, at=memory.occurred_at)
                written.append((uri, meta))
                states[channel] = self._next_state(states.get(channel), memory)
            saved = dict(self._channels)
            for name, (ref, state) in states.items():
                if self._channels.get(name) == (ref, state):
                    continue
                body = state.to_json()
                if ref is None:
                    ref = batch.write(
                        cg.Event(text=body, channel=name, kind="channel-state",
                                 tags=[CHANNEL_TAG]),
                        ns=self.ns, at=state.last_message_at,
                    )
                else:
                    ref = batch.update(ref, at=state.last_message_at, text=body)
                saved[name] = (ref, state)
        self._channels = saved
        return [_message(self.cx.resolve(uri), meta) for uri, meta in written]

    def _check_message(
        self,
        channel: object,
        role: object,
        sender: object,
        content: object,
        at: object,
        metadata: object = None,
    ) -> tuple[str, cg.Event, dict[str, Any]]:
        channel = check_channel(channel)
        if role not in ROLES:
            raise ValidationError(f"must be one of {', '.join(ROLES)}, not {role!r}",
                                  field="role")
        assert isinstance(role, str)
        sender = check_text(sender, "sender")
        content = check_text(content, "content")
        at = check_ms(at, "at")
        meta = _check_metadata(role, metadata)
        if role == "tool_use":
            try:
                value = json.loads(content)
            except ValueError:
                value = None
            if not isinstance(value, dict):
                raise ValidationError("a tool_use message's content must be a JSON object",
                                      field="content")
        memory = cg.Event(
            text=content,
            channel=channel,
            kind=role,
            speaker=sender,
            occurred_at=at,
            summary=canonical_json(meta) if meta else None,
            tags=[MESSAGE_TAG, channel_tag(channel)],
        )
        return channel, memory, meta

    def _next_state(
        self, current: tuple[cg.MemoryURI | None, ChannelState] | None, memory: cg.Event
    ) -> tuple[cg.MemoryURI | None, ChannelState]:
        assert memory.channel is not None and memory.occurred_at is not None
        uri, state = current if current is not None else (None, None)
        unread = state.unread if state is not None else 0
        if memory.kind == "user":
            unread += 1
        elif memory.kind == "assistant":
            unread = 0
        line = " ".join(memory.text.split())
        if len(line) > SUMMARY_CHARS:
            line = line[: SUMMARY_CHARS - 3] + "..."
        last = memory.occurred_at
        if state is not None:
            last = max(last, state.last_message_at)
        return uri, ChannelState(
            channel=memory.channel,
            last_message_at=last,
            unread=unread,
            summary=f"{memory.speaker}: {line}",
            layer="foreground",
        )

    def history(
        self, channel: str, *, limit: int = FOREGROUND_MESSAGES, before: int | None = None
    ) -> list[ChatMessage]:
        """The last ``limit`` messages of ``channel`` (before ``before``, ms, if given),
        oldest first. Read through the index by recency: the cost does not grow with the
        channel's history.

        Raises:
            ValidationError: a bad channel, limit (1..1000) or time.
        """
        check_channel(channel)
        if type(limit) is not int or not 1 <= limit <= 1000:
            raise ValidationError(f"must be an integer from 1 to 1000, not {limit!r}",
                                  field="limit")
        where = cg.Q.tag(channel_tag(channel)) & cg.Q.ns(self.ns)
        if before is not None:
            where = where & cg.Q.until(check_ms(before, "before"))
        hits = self.cx.find(where, limit=limit, order_by="recent")
        records = {hit.record.uri: hit.record for hit in hits}
        if len(hits) == limit:
            # "recent" breaks ties by id, so a cut inside one millisecond may have kept the
            # wrong ones: read that millisecond whole and keep the latest by seq.
            edge = min(record.at for record in records.values())
            same = self.cx.find(
                where & cg.Q.since(edge) & cg.Q.until(edge + 1), limit=_SAME_MS_LIMIT,
                order_by="recent",
            )
            records.update((hit.record.uri, hit.record) for hit in same)
        ordered = sorted(records.values(), key=lambda record: (record.at, record.seq))
        return [_message(record, None) for record in ordered[-limit:]]

    # -- channels ---------------------------------------------------------------------

    def channel(self, channel: str) -> ChannelState:
        """The state of ``channel``.

        Raises:
            NotFoundError: no message was ever recorded on it.
        """
        check_channel(channel)
        if channel not in self._channels:
            raise NotFoundError(f"no channel {channel!r} in this chat memory")
        return self._channels[channel][1]

    def channels(self) -> list[ChannelState]:
        """Every channel's state, by name."""
        return [self._channels[name][1] for name in sorted(self._channels)]

    def mark_read(self, channel: str, *, at: int | None = None) -> ChannelState:
        """Set ``channel``'s unread count to zero (journaled)."""
        return self._set_state(channel, at, unread=0)

    def set_summary(
        self, channel: str, summary: str, *, layer: str = "background", at: int | None = None
    ) -> ChannelState:
        """Replace ``channel``'s one-line summary and set its layer (what the compactor
        does to an idle channel)."""
        line = check_text(summary, "summary")
        if "\n" in line or len(line) > 300:
            raise ValidationError("must be one line of at most 300 characters",
                                  field="summary")
        if layer not in ("foreground", "background"):
            raise ValidationError("must be 'foreground' or 'background'", field="layer")
        return self._set_state(channel, at, summary=line, layer=layer)

    def _set_state(self, channel: str, at: int | None, **changes: Any) -> ChannelState:
        state = self.channel(channel)
        new = attrs.evolve(state, **changes)
        if new == state:
            return state
        uri = self._channels[channel][0]
        when = self._time(at, "at")
        uri = self.cx.update(uri, at=when, text=new.to_json())
        self._channels[channel] = (uri, new)
        return new

    # -- context ----------------------------------------------------------------------

    def assemble(
        self, trigger_channel: str, budget_tokens: int, *, now: int | None = None
    ) -> ChatContext:
        """Build the layers of a turn triggered by a message on ``trigger_channel``.

        The system floor (pinned ``identity``-tagged preferences and constraints, the
        active operations, the known facts) and the background lines are taken first; the
        foreground then gets what is left of the budget, within its soft cap of 20
        messages / 4,000 tokens, newest messages first, shown oldest first. Channels idle
        for more than 24 hours (the archived layer) cost nothing.

        Raises:
            ValidationError: a bad channel, budget or time.
        """
        check_channel(trigger_channel)
        if type(budget_tokens) is not int or budget_tokens < 1:
            raise ValidationError("must be a positive integer", field="budget_tokens")
        now = self._time(now, "now")
        estimate = cg.estimate_tokens
        identity = tuple(
            hit.record.memory.text
            for hit in self.cx.find(
                cg.Q.tag(IDENTITY_TAG) & cg.Q.ns(self.ns) & cg.Q.pinned(),
                limit=KNOWN_FACTS, order_by="priority",
            )
            if isinstance(hit.record.memory, (cg.Preference, cg.Constraint))
        )
        facts = tuple(record.memory.text for record in self.hot_facts(now=now))
        background = tuple(
            f"[{state.channel}] {state.summary} (last: {format_time(state.last_message_at)})"
            for state in self.channels()
            if state.channel != trigger_channel and state.layer_at(now) != "archived"
            and state.last_message_at <= now
        )
        operations = self.operations.floor_lines()
        used = sum(estimate(line) for line in identity + operations + facts + background)
        room = min(budget_tokens - used, FOREGROUND_TOKENS)
        foreground: list[ChatMessage] = []
        if trigger_channel in self._channels and room > 0:
            window = self.history(trigger_channel, limit=FOREGROUND_MESSAGES, before=now + 1)
            for message in reversed(window):
                cost = estimate(message.content)
                if cost > room:
                    break
                room -= cost
                used += cost
                foreground.append(message)
        foreground.reverse()
        return ChatContext(
            channel=trigger_channel,
            identity=identity,
            operations=operations,
            facts=facts,
            foreground=tuple(foreground),
            background=background,
            tokens=used,
        )

    # -- knowledge --------------------------------------------------------------------

    def hot_facts(self, *, limit: int = KNOWN_FACTS, now: int | None = None) -> list[cg.Record]:
        """The hot facts, most hits first, then the most recently touched or written
        (then by id): what fills "known facts". Cold facts are archived, so never here."""
        now = self._time(now, "now")
        pool = self.cx.find(knowledge(self.ns), limit=HOT_POOL, order_by="salience", now=now)
        ranked = []
        for hit in pool:
            signals = self.cx.salience(hit.record.uri, now=now)
            touched = max(signals.last_access, hit.record.at)
            ranked.append((-signals.access_count, -touched, hit.record.uri.id, hit.record))
        ranked.sort(key=lambda row: row[:3])
        return [row[3] for row in ranked[:limit]]

    def recall_facts(
        self, query: str, *, limit: int = 5, now: int | None = None
    ) -> list[cg.Record]:
        """Hot and cold knowledge relevant to ``query``, best first.

        The candidates are the hits of a hybrid recall over the hot (active) knowledge and
        the cold (archived) knowledge most similar to the query by vector (the store's
        recall leaves archived memories out, so the cold ones are compared here, among
        the 2,000 most recently archived); they are ranked together by cosine similarity
        to the query (ties: hot first, then by id). The read is journaled as an access of
        what it returns: a hit for a hot fact, a promotion back to hot for a cold one.
        """
        query = check_text(query, "query")
        if type(limit) is not int or not 1 <= limit <= 50:
            raise ValidationError("must be an integer from 1 to 50", field="limit")
        now = self._time(now, "now")
        hot = [hit.record for hit in self.cx.recall(
            query, k=limit, where=knowledge(self.ns), now=now, expand=False)]
        cold = [hit.record for hit in self.cx.find(
            knowledge(self.ns) & cg.Q.status("archived"), limit=COLD_POOL, order_by="recent",
            now=now)]
        records = hot + cold
        if not records:
            return []
        vectors = self.cx.embedder.embed([query] + [r.memory.text for r in records])
        cosines = (vectors[1:] @ vectors[0]).tolist()
        ranked = sorted(
            (
                (-round(cos, 6), index >= len(hot), record.uri.id, record)
                for index, (cos, record) in enumerate(zip(cosines, records, strict=True))
                if index < len(hot) or cos >= COLD_MIN_COSINE
            ),
            key=lambda row: row[:3],
        )
        chosen = [row[3] for row in ranked[:limit]]
        if chosen:
            with self.cx.batch() as batch:
                batch.record_access([record.uri for record in chosen], at=now)
        return chosen

    def remember(
        self, text: str, *, type: str = "fact", tags: Iterable[str] = (), at: int | None = None
    ) -> cg.MemoryURI:
        """Keep a piece of knowledge, tagged ``remembered`` (written by the model).

        Raises:
            ValidationError: a bad text, type or tag.
        """
        if type not in KNOWLEDGE_TYPES:
            raise ValidationError(f"must be one of {', '.join(sorted(KNOWLEDGE_TYPES))}",
                                  field="type")
        tags = list(tags)
        if IDENTITY_TAG in (tag.lower() for tag in tags if isinstance(tag, str)):
            raise ValidationError("identity documents are not written by the model",
                                  field="tags")
        cls = getattr(cg, KNOWLEDGE_TYPES[type])
        memory = cls(text=check_text(text, "text"), tags=[*tags, FACT_TAG],
                     source=cg.Source(origin="llm"))
        return self.cx.write(memory, ns=self.ns, at=at)

    def forget(self, uri: str, *, at: int | None = None) -> cg.MemoryURI:
        """Tombstone a piece of knowledge of this chat memory.

        Raises:
            URIError: a malformed URI. NotFoundError: no such memory.
            ValidationError: a memory that is not knowledge of this chat memory (a
                message, an identity document, another namespace) (field ``uri``).
        """
        record = self.cx.resolve(cg.MemoryURI.parse(uri).head)
        memory = record.memory
        if (record.uri.ns != self.ns or memory.type_name not in KNOWLEDGE_TYPES
                or IDENTITY_TAG in memory.tags):
            raise ValidationError("only remembered knowledge of this chat can be forgotten",
                                  field="uri")
        if record.status == "tombstoned":
            raise ValidationError("is already forgotten", field="uri")
        return self.cx.tombstone(record.uri.head, reason="forgotten by the model", at=at)

    # -- inbound queue ----------------------------------------------------------------

    def enqueue(
        self, envelope: Mapping[str, Any], priority: str = "normal", *, at: int | None = None
    ) -> str:
        """Add an inbound envelope to the durable queue; returns its id.

        Raises:
            ValidationError: ``priority`` is not urgent, normal or background, or the
                envelope is not a JSON-serialisable mapping.
        """
        from cortexgraph.integrations.chat.queue import TIERS, check_envelope

        if priority not in TIERS:
            raise ValidationError(f"must be one of {', '.join(TIERS)}, not {priority!r}",
                                  field="priority")
        body = check_envelope(envelope)
        when = self._time(at, "at")
        memory = cg.Event(
            text=body, kind="inbound", occurred_at=when,
            tags=["chat-queue", "queue-pending", f"tier-{priority}"],
            summary=canonical_json({"attempts": 0}),
        )
        uri = self.cx.write(memory, ns=self.ns, at=when)
        record = self.cx.resolve(uri)
        item = QueueItem.from_record(record, record.seq)
        self._queue[item.id] = item
        return item.id

    def next(self, *, at: int | None = None) -> QueueItem | None:
        """Hand out the next pending envelope (urgent, then normal, then background;
        first in, first out within a tier) and mark it ``processing``, one attempt more.
        ``None`` when nothing is pending."""
        pending = [item for item in self._queue.values() if item.state == "pending"]
        if not pending:
            return None
        item = min(pending, key=lambda i: i.order)
        when = self._time(at, "at")
        with self.cx.batch() as batch:
            item = self._queue_put(batch, item, "processing", when, attempts=item.attempts + 1)
        self._queue[item.id] = item
        return item

    def complete(self, item_id: str, *, at: int | None = None) -> QueueItem:
        """Mark a ``processing`` envelope done.

        Raises:
            NotFoundError: no live item has this id.
            ValidationError: the item is not being processed (field ``id``).
        """
        item = self._processing(item_id)
        when = self._time(at, "at")
        with self.cx.batch() as batch:
            item = self._queue_put(batch, item, "done", when)
        del self._queue[item.id]
        return item

    def fail(self, item_id: str, error: str, *, at: int | None = None) -> QueueItem:
        """Record a failed attempt: the envelope goes back to ``pending``, or to
        ``failed`` once it has been tried ``max_attempts`` times."""
        item = self._processing(item_id)
        error = check_text(error, "error")
        when = self._time(at, "at")
        state: QueueState = "failed" if item.attempts >= self.max_attempts else "pending"
        with self.cx.batch() as batch:
            item = self._queue_put(batch, item, state, when, error=error[:500])
        if state == "failed":
            del self._queue[item.id]
        else:
            self._queue[item.id] = item
        return item

    def queued(self) -> list[QueueItem]:
        """The live items (pending and processing), in the order they would be handed
        out."""
        return sorted(self._queue.values(), key=lambda i: i.order)

    def _processing(self, item_id: object) -> QueueItem:
        if type(item_id) is not str:
            raise ValidationError("must be a queue item id (str)", field="id")
        item = self._queue.get(item_id)
        if item is None:
            raise NotFoundError(f"no pending or processing queue item {item_id!r}")
        if item.state != "processing":
            raise ValidationError(f"item {item_id} is {item.state}, not processing", field="id")
        return item

    def _queue_put(
        self, batch: Any, item: QueueItem, state: QueueState, at: int, *,
        attempts: int | None = None, error: str | None = None,
    ) -> QueueItem:
        new = attrs.evolve(
            item,
            state=state,
            attempts=item.attempts if attempts is None else attempts,
            error=item.error if error is None else error,
        )
        uri = batch.update(item.uri, at=at, tags=new.tags(), summary=new.summary_json())
        return attrs.evolve(new, uri=uri)


def _message(record: Any, meta: Mapping[str, Any] | None) -> ChatMessage:
    memory = record.memory
    if meta is None:
        meta = json.loads(memory.summary) if memory.summary else {}
    return ChatMessage(
        uri=record.uri,
        channel=memory.channel,
        role=memory.kind,
        sender=memory.speaker,
        content=memory.text,
        at=memory.occurred_at,
        metadata=dict(meta),
        seq=record.seq,
    )
