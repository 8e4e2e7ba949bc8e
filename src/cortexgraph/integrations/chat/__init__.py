"""The memory of a multi-channel chat runtime on cortexgraph.

:class:`ChatMemory` records every channel's messages in one session, keeps a durable
inbound queue and each channel's state in the journal, and assembles a turn's layered
context, which :func:`to_messages` renders for Anthropic or OpenAI. :class:`ChatTools` gives
the model its memory tools, :class:`Gardener` runs the maintenance, and
``ChatMemory.operations`` (an :class:`OperationLog`) tracks dispatched work. The guide is
``docs/chat.md``.
"""

from cortexgraph.integrations.chat.gardener import (
    ExtractiveSummarizer,
    Gardener,
    GardenReport,
    Summarizer,
)
from cortexgraph.integrations.chat.layers import ChatContext, ChatMessage, render_json, to_messages
from cortexgraph.integrations.chat.memory import ChannelState, ChatMemory
from cortexgraph.integrations.chat.operations import ORPHANED, Operation, OperationLog
from cortexgraph.integrations.chat.queue import QueueItem
from cortexgraph.integrations.chat.tools import ChatTools

__all__ = [
    "ORPHANED",
    "ChannelState",
    "ChatContext",
    "ChatMemory",
    "ChatMessage",
    "ChatTools",
    "ExtractiveSummarizer",
    "GardenReport",
    "Gardener",
    "Operation",
    "OperationLog",
    "QueueItem",
    "Summarizer",
    "render_json",
    "to_messages",
]
