"""The gardener: the chat memory's maintenance, as deterministic functions of ``now``.

Each step journals what it changes at ``now`` and is idempotent: run again at the same
``now`` it finds nothing left to do and writes nothing (same seq, same root).

- :meth:`Gardener.compact_channels`: channels in the foreground and idle for an hour or
  more get a summary from the :class:`Summarizer` (extractive by default; an LLM one is
  any object with ``summarize``) and are demoted to the background.
- :meth:`Gardener.extract_facts`: messages not yet seen by the fact extractor go through
  :func:`cortexgraph.extract.ingest` (the :class:`~cortexgraph.extract.RuleExtractor` by
  default), per channel; a cursor per channel (the last message taken) is journaled with
  it, so a message is extracted once.
- :meth:`Gardener.evict_vectors`: hot facts untouched for 14 days with fewer than 3 hits
  go cold (archived; still recallable by vector through ``memory_query``).
- :meth:`Gardener.harvest_operations`: read completed operations become facts; gardened
  operations are archived after 7 days.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

import attrs

import cortexgraph as cg
from cortexgraph.errors import ValidationError
from cortexgraph.extract import ExtractionInput, Extractor, Turn, ingest
from cortexgraph.integrations.chat.layers import ChatMessage
from cortexgraph.integrations.chat.memory import ChatMemory, channel_tag, knowledge
from cortexgraph.integrations.chat.values import canonical_json, check_ms

__all__ = ["ExtractiveSummarizer", "GardenReport", "Gardener", "Summarizer"]

IDLE_MS = 3600 * 1000
COLD_AFTER_MS = 14 * 24 * 3600 * 1000
COLD_BELOW_HITS = 3
CURSOR_TAG = "chat-gardener"
_LIMIT = 100_000
_BATCH = 1000


class Summarizer(Protocol):
    """Summarises a channel's recent messages in one line."""

    def summarize(self, messages: Sequence[ChatMessage]) -> str:
        """One line (at most 300 characters) for ``messages``, oldest first."""
        ...


class ExtractiveSummarizer:
    """The default summary: how many recent messages, who spoke, and the first sentence of
    the last user message (or of the last message), cut at 120 characters."""

    def summarize(self, messages: Sequence[ChatMessage]) -> str:
        if not messages:
            return "no messages"
        users = [m for m in messages if m.role == "user"]
        last = users[-1] if users else messages[-1]
        words = " ".join(last.content.split())
        sentence = words.split(". ")[0]
        if len(sentence) > 120:
            sentence = sentence[:117] + "..."
        speakers = sorted({m.sender for m in messages if m.role == "user"})
        who = ", ".join(speakers) if speakers else last.sender
        return f"{len(messages)} recent messages from {who}; last: {sentence}"


@attrs.frozen
class GardenReport:
    """What one :meth:`Gardener.run` did.

    Attributes:
        compacted: channels summarised and demoted to the background.
        extracted: memories written by the fact extractor.
        evicted: hot facts that went cold.
        harvested: facts written from completed operations.
        archived_operations: how many gardened operations were archived.
    """

    compacted: tuple[str, ...]
    extracted: tuple[cg.MemoryURI, ...]
    evicted: tuple[cg.MemoryURI, ...]
    harvested: tuple[cg.MemoryURI, ...]
    archived_operations: int


class Gardener:
    """The maintenance steps of a :class:`ChatMemory`.

    Args:
        chat: the chat memory.
        summarizer: makes channel summaries (default :class:`ExtractiveSummarizer`).
        extractor: finds facts in messages (default: ``ingest``'s RuleExtractor).
    """

    def __init__(
        self,
        chat: ChatMemory,
        *,
        summarizer: Summarizer | None = None,
        extractor: Extractor | None = None,
    ) -> None:
        self.chat = chat
        self.summarizer = ExtractiveSummarizer() if summarizer is None else summarizer
        if not callable(getattr(self.summarizer, "summarize", None)):
            raise ValidationError("must have a summarize(messages) method", field="summarizer")
        self.extractor = extractor

    def run(self, *, now: int) -> GardenReport:
        """Every step, in order, at ``now``."""
        compacted = self.compact_channels(now=now)
        extracted = self.extract_facts(now=now)
        evicted = self.evict_vectors(now=now)
        harvested, archived = self.harvest_operations(now=now)
        return GardenReport(tuple(compacted), tuple(extracted), tuple(evicted),
                            tuple(harvested), archived)

    def compact_channels(self, *, now: int) -> list[str]:
        """Summarise the foreground channels idle for an hour or more (and not yet
        archived) and demote them to the background. Returns their names."""
        now = check_ms(now, "now")
        done = []
        for state in self.chat.channels():
            idle = now - state.last_message_at
            if state.layer_at(now) != "foreground" or idle < IDLE_MS:
                continue
            recent = self.chat.history(state.channel, limit=20, before=now + 1)
            line = " ".join(str(self.summarizer.summarize(recent)).split())[:300]
            self.chat.set_summary(state.channel, line or "no summary", layer="background",
                                  at=now)
            done.append(state.channel)
        return done

    def extract_facts(self, *, now: int) -> list[cg.MemoryURI]:
        """Run the extractor over each channel's messages since its cursor (up to
        ``now``); returns the memories written."""
        now = check_ms(now, "now")
        cx, ns = self.chat.cx, self.chat.ns
        cursor_uri, cursors = self._cursors()
        written: list[cg.MemoryURI] = []
        moved = dict(cursors)
        for state in self.chat.channels():
            seen = cursors.get(state.channel, [-1, -1])
            where = cg.Q.tag(channel_tag(state.channel)) & cg.Q.ns(ns) & cg.Q.until(now + 1)
            if seen[0] >= 0:
                where = where & cg.Q.since(seen[0])
            hits = cx.find(where, limit=_LIMIT, order_by="recent")
            fresh = [
                (record, record.memory)
                for record in sorted((h.record for h in hits), key=lambda r: (r.at, r.seq))
                if [record.at, record.seq] > seen and isinstance(record.memory, cg.Event)
                and record.memory.kind in ("user", "assistant")
            ]
            if not fresh:
                continue
            for start in range(0, len(fresh), _BATCH):
                part = fresh[start : start + _BATCH]
                report = ingest(
                    cx,
                    ExtractionInput([Turn(str(m.kind), m.text, r.at) for r, m in part]),
                    source_id=f"chat-{state.channel}-{part[0][0].seq}-{part[-1][0].seq}",
                    extractor=self.extractor, ns=ns, global_ns=ns, at=now,
                )
                written.extend(report.written)
            last = fresh[-1][0]
            moved[state.channel] = [last.at, last.seq]
        if moved != cursors:
            text = canonical_json(moved)
            if cursor_uri is None:
                cx.write(cg.Event(text=text, kind="gardener-cursor", tags=[CURSOR_TAG]),
                         ns=ns, at=now)
            else:
                cx.update(cursor_uri, at=now, text=text)
        return written

    def _cursors(self) -> tuple[cg.MemoryURI | None, dict[str, Any]]:
        hits = self.chat.cx.find(cg.Q.tag(CURSOR_TAG) & cg.Q.ns(self.chat.ns), limit=1)
        if not hits:
            return None, {}
        record = hits[0].record
        return record.uri.head, json.loads(record.memory.text)

    def evict_vectors(self, *, now: int) -> list[cg.MemoryURI]:
        """Archive (make cold) the hot facts untouched for 14 days with fewer than 3 hits;
        pinned ones stay. Returns them."""
        now = check_ms(now, "now")
        cx = self.chat.cx
        cold = []
        for hit in cx.find(knowledge(self.chat.ns), limit=_LIMIT, order_by="recent", now=now):
            record = hit.record
            if record.memory.pinned:
                continue
            signals = cx.salience(record.uri, now=now)
            touched = max(signals.last_access, record.at)
            if now - touched >= COLD_AFTER_MS and signals.access_count < COLD_BELOW_HITS:
                cold.append(record.uri.head)
        if cold:
            with cx.batch() as batch:
                for uri in cold:
                    batch.archive(uri, reason="cold: untouched for 14 days, under 3 hits",
                                  at=now)
        return cold

    def harvest_operations(self, *, now: int) -> tuple[list[cg.MemoryURI], int]:
        """Facts from read completed operations; archive operations gardened 7 days ago."""
        return self.chat.operations.harvest(now=check_ms(now, "now"))

