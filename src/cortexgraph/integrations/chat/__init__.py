"""The memory of a multi-channel chat runtime on cortexgraph.

:class:`ChatMemory` records every channel's messages in one session, keeps a durable
inbound queue and each channel's state in the journal, and assembles a turn's layered
context, which :func:`to_messages` renders for Anthropic or OpenAI. :class:`ChatTools` gives
the model its memory tools. The guide is ``docs/chat.md``.
"""

from cortexgraph.integrations.chat.layers import ChatContext, ChatMessage, render_json, to_messages
from cortexgraph.integrations.chat.memory import ChannelState, ChatMemory
from cortexgraph.integrations.chat.queue import QueueItem
from cortexgraph.integrations.chat.tools import ChatTools

__all__ = [
    "ChannelState",
    "ChatContext",
    "ChatMemory",
    "ChatMessage",
    "ChatTools",
    "QueueItem",
    "render_json",
    "to_messages",
]
