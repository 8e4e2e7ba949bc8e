"""Names, argument checks and canonical JSON shared by the chat memory's modules (pure)."""

from __future__ import annotations

import json
import re
from typing import Any

from cortexgraph.errors import ValidationError

__all__ = ["FACT_TAG", "canonical_json", "check_channel", "check_ms", "check_text"]

#: The tag of knowledge written for the chat (by the model or from operations).
FACT_TAG = "remembered"

_CHANNEL = re.compile(r"[a-z0-9][a-z0-9._:/@-]{0,59}")


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept: the same value gives the same text.

    Raises:
        TypeError, ValueError: a value JSON cannot hold (NaN and infinities included).
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def check_channel(channel: object) -> str:
    """A channel name: 1-60 of ``a-z 0-9 . _ : / @ -``, starting with a letter or digit
    (it becomes a tag, and tags are lowercase without spaces)."""
    if type(channel) is not str or not _CHANNEL.fullmatch(channel):
        raise ValidationError(
            f"must be 1-60 characters of a-z 0-9 . _ : / @ - starting with a letter or "
            f"digit, not {channel!r}",
            field="channel",
        )
    return channel


def check_ms(value: object, field: str) -> int:
    """A time in ms since the epoch (a non-negative int, not a bool)."""
    if type(value) is not int or value < 0:
        raise ValidationError(
            f"must be a time in ms (a non-negative integer), not {value!r}", field=field
        )
    return value


def check_text(value: object, field: str, limit: int | None = None) -> str:
    """A non-blank string, of at most ``limit`` characters when one is given."""
    if type(value) is not str or not value.strip():
        raise ValidationError("must be a non-blank string", field=field)
    if limit is not None and len(value) > limit:
        raise ValidationError(f"must be at most {limit:,} characters", field=field)
    return value
