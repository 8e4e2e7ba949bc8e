"""The nine memory types: a closed set of frozen, validated records.

What agents remember: :class:`Goal`, :class:`Preference`, :class:`Constraint`,
:class:`Fact`, :class:`Pattern`, :class:`Event`, :class:`ArtifactRef`. What execution
records: :class:`Attest` (which memories an outcome cited) and :class:`LearnWeights` (the
ranking weights learned from it). Both are written by ``Cortex.attest``: a store refuses a
LearnWeights written directly, and checks an Attest's citations (:func:`cited_uris` here,
their existence in the store's batch).

Every type shares the common fields of :class:`Memory`. Construction normalises and then
validates; anything invalid raises :class:`~cortexgraph.errors.ValidationError` naming the
field, including unknown fields and missing required ones.

Normalisation (so that equal records have equal bytes):

- ``text``, ``summary`` and other strings are put in Unicode NFC;
- ``tags`` are lowercased, de-duplicated and sorted into a tuple;
- ``confidence`` ints become floats and ``-0.0`` becomes ``0.0``;
- an empty ``summary`` becomes ``None``.

The canonical map of a record (:func:`canonical_map`, :meth:`Memory.to_dict`): text keys,
``"type"`` first in meaning, every field whose value is ``None``, ``False``, ``""`` or
``()`` omitted, ``source`` as a nested map with the same rule. :func:`memory_from_map`
builds a record back through the public constructors. Its bytes, and the fast paths that
make and read them on every write and verified read, are in :mod:`cortexgraph.core.body`.

The converters and validators are public so that the fast paths can check that each class
declares its fields with them, and reuse them for values they cannot accept outright.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import attrs

from ..errors import URIError, ValidationError
from .codec import canonical_keys
from .hashing import hash_function
from .uri import MemoryURI

__all__ = [
    "ArtifactRef",
    "Attest",
    "Constraint",
    "Event",
    "Fact",
    "Goal",
    "LearnWeights",
    "MAX_TEXT_BYTES",
    "MEMORY_TYPES",
    "Memory",
    "ORIGINS",
    "Pattern",
    "Preference",
    "Source",
    "canonical_map",
    "check_utf8",
    "cited_uris",
    "memory_fields",
    "memory_from_map",
    "type_by_name",
]

MAX_TEXT_BYTES = 1 << 20  # 1 MiB of UTF-8
MAX_SHORT_TEXT = 1024  # summary, path, channel and the like, in characters
MAX_TAGS = 64
MAX_TAG_LENGTH = 64
MAX_MS = (1 << 63) - 1
ORIGINS = ("human", "llm", "system")
GOAL_STATUSES = ("active", "achieved", "abandoned", "blocked")
OUTCOMES = ("success", "failure")
WEIGHT_TOTAL = 1_000_000
WEIGHT_COUNT = 5

_TAG_FORBIDDEN = re.compile(r"[\s\x00-\x1f\x7f]")
_CONTENT_HASH = re.compile(r"^(sha256|blake3):[0-9a-f]{64}$")

T = TypeVar("T")


# ---------------------------------------------------------------------------
# Converters and validators. Converters normalise values of the right type and leave
# anything else alone, so that the validator reports the type error by field name.


def check_utf8(value: str, field: str) -> None:
    """Raise ``ValidationError`` naming ``field`` if ``value`` cannot be encoded as UTF-8
    (a lone surrogate such as ``"\\ud800"``)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("invalid UTF-8 (lone surrogate)", field=field) from None


def nfc(value: Any) -> Any:
    if type(value) is str and not unicodedata.is_normalized("NFC", value):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value  # the validator reports it
        return unicodedata.normalize("NFC", value)
    return value


def _empty_to_none(value: Any) -> Any:
    return None if value == "" else value


def nfc_or_none(value: Any) -> Any:
    if value == "":
        return None
    return nfc(value)


def normalise_tags(value: Any) -> Any:
    if isinstance(value, (list, tuple, set, frozenset)):
        if not all(type(tag) is str for tag in value):
            return value  # the validator reports it
        return tuple(sorted({normalise_tag(tag) for tag in value}))
    return value


def normalise_tag(tag: str) -> str:
    """Lowercase and NFC, repeated to a fixed point (lowercasing can un-normalise)."""
    for _ in range(4):
        try:
            normal = unicodedata.normalize("NFC", tag.lower())
        except UnicodeError:  # pragma: no cover - normalize does not raise on str
            return tag
        if normal == tag:
            return tag
        tag = normal
    return tag


def normalise_confidence(value: Any) -> Any:
    if type(value) is int:
        return float(value)
    if type(value) is float and value == 0.0:
        return 0.0  # folds -0.0 so that equal records have equal bytes
    return value


def _text(required: bool) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        name = attribute.name
        if type(value) is not str:
            raise ValidationError(f"must be a string, not {type(value).__name__}", field=name)
        check_utf8(value, name)
        if len(value) * 4 > MAX_TEXT_BYTES and len(value.encode("utf-8")) > MAX_TEXT_BYTES:
            raise ValidationError(f"longer than {MAX_TEXT_BYTES} bytes of UTF-8", field=name)
        if required and not value.strip():
            raise ValidationError("must not be empty", field=name)

    check.text_required = required  # type: ignore[attr-defined]  # read by core.body
    return check


def check_optional_short(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    name = attribute.name
    if type(value) is not str:
        raise ValidationError(f"must be a string or None, not {type(value).__name__}", field=name)
    check_utf8(value, name)
    if len(value) > MAX_SHORT_TEXT:
        raise ValidationError(f"longer than {MAX_SHORT_TEXT} characters", field=name)
    if "\n" in value or "\r" in value:
        raise ValidationError("must be a single line", field=name)


def _optional_long(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    _text(required=False)(_, attribute, value)


def check_tags(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not tuple:
        raise ValidationError(
            f"must be a list of strings, not {type(value).__name__}", field=attribute.name
        )
    if len(value) > MAX_TAGS:
        raise ValidationError(f"more than {MAX_TAGS} tags", field=attribute.name)
    for tag in value:
        if type(tag) is not str:
            raise ValidationError(
                f"every tag must be a string, not {type(tag).__name__}", field=attribute.name
            )
        check_utf8(tag, attribute.name)
        if not tag or len(tag) > MAX_TAG_LENGTH:
            raise ValidationError(
                f"tag {tag!r} must have 1 to {MAX_TAG_LENGTH} characters", field=attribute.name
            )
        if _TAG_FORBIDDEN.search(tag):
            raise ValidationError(
                f"tag {tag!r} contains whitespace or a control character", field=attribute.name
            )


def check_unit_float(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not float:
        raise ValidationError(f"must be a number, not {type(value).__name__}", field=attribute.name)
    if not math.isfinite(value):
        raise ValidationError(f"must be finite, not {value}", field=attribute.name)
    if not 0.0 <= value <= 1.0:
        raise ValidationError(f"must be between 0 and 1, not {value}", field=attribute.name)


def _int_range(lo: int, hi: int) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if type(value) is not int:
            raise ValidationError(
                f"must be an integer, not {type(value).__name__}", field=attribute.name
            )
        if not lo <= value <= hi:
            raise ValidationError(
                f"must be between {lo} and {hi}, not {value}", field=attribute.name
            )

    check.bounds = (lo, hi)  # type: ignore[attr-defined]  # read by core.body
    return check


def check_optional_ms(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if type(value) is not int:
        raise ValidationError(
            f"must be integer milliseconds since the epoch or None, not {type(value).__name__}",
            field=attribute.name,
        )
    if not 0 <= value <= MAX_MS:
        raise ValidationError(f"must be between 0 and 2**63-1, not {value}", field=attribute.name)


def check_bool(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not bool:
        raise ValidationError(f"must be True or False, not {value!r}", field=attribute.name)


def _one_of(choices: tuple[str, ...]) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in choices or type(value) is not str:
            raise ValidationError(
                f"must be one of {', '.join(choices)}, not {value!r}", field=attribute.name
            )

    check.choices = choices  # type: ignore[attr-defined]  # read by core.body
    return check


def _guarded(cls: type[T]) -> type[T]:
    """Make unknown, missing and positional arguments raise ``ValidationError``."""
    generated = cls.__init__
    fields = attrs.fields(cls)  # type: ignore[arg-type]
    known = frozenset(f.name for f in fields)
    required = tuple(f.name for f in fields if f.default is attrs.NOTHING)
    type_name = getattr(cls, "type_name", cls.__name__)

    @functools.wraps(generated)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if args:
            raise ValidationError(f"{cls.__name__} takes keyword arguments only")
        unknown = kwargs.keys() - known
        if unknown:
            name = sorted(unknown)[0]
            raise ValidationError(f"unknown field for {type_name}", field=name)
        for name in required:
            if name not in kwargs:
                raise ValidationError(f"required for {type_name}", field=name)
        generated(self, **kwargs)

    cls.__init__ = __init__  # type: ignore[method-assign]
    return cls


# ---------------------------------------------------------------------------
# Records


@_guarded
@attrs.frozen(kw_only=True)
class Source:
    """Where a memory came from: the session, branch and directory, and who said it."""

    origin: str = attrs.field(default="system", validator=_one_of(ORIGINS))
    session: str | None = attrs.field(
        default=None, converter=nfc_or_none, validator=check_optional_short
    )
    branch: str | None = attrs.field(
        default=None, converter=nfc_or_none, validator=check_optional_short
    )
    cwd: str | None = attrs.field(
        default=None, converter=nfc_or_none, validator=check_optional_short
    )


def check_source(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and type(value) is not Source:
        raise ValidationError(
            f"must be a cortexgraph.Source or None, not {type(value).__name__}",
            field=attribute.name,
        )


def check_valid_interval(instance: Memory, _: attrs.Attribute[Any], value: Any) -> None:
    check_optional_ms(instance, _, value)
    if value is not None and instance.valid_from is not None and value < instance.valid_from:
        raise ValidationError("must not be before valid_from", field="valid_to")


@attrs.frozen(kw_only=True)
class Memory:
    """The fields every memory type shares. Instantiate one of the nine subclasses."""

    type_name: ClassVar[str] = "memory"
    type_code: ClassVar[int] = 0

    text: str = attrs.field(converter=nfc, validator=_text(required=True))
    summary: str | None = attrs.field(
        default=None, converter=nfc_or_none, validator=check_optional_short
    )
    tags: tuple[str, ...] = attrs.field(default=(), converter=normalise_tags, validator=check_tags)
    confidence: float = attrs.field(
        default=1.0, converter=normalise_confidence, validator=check_unit_float
    )
    priority: int = attrs.field(default=5, validator=_int_range(1, 10))
    pinned: bool = attrs.field(default=False, validator=check_bool)
    source: Source | None = attrs.field(default=None, validator=check_source)
    valid_from: int | None = attrs.field(default=None, validator=check_optional_ms)
    valid_to: int | None = attrs.field(default=None, validator=check_valid_interval)

    def to_dict(self) -> dict[str, Any]:
        """The canonical map of this memory: what is journaled and hashed.

        >>> Fact(text="hi", tags=["B", "a"]).to_dict()
        {'tags': ['a', 'b'], 'text': 'hi', 'type': 'fact', 'priority': 5, 'confidence': 1.0}
        """
        return canonical_map(self)

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Memory:
        """Build the memory a map describes; ``data["type"]`` picks the class.

        Raises:
            ValidationError: an unknown type or field, or a bad value.
        """
        return memory_from_map(data)


@_guarded
@attrs.frozen(kw_only=True)
class Goal(Memory):
    """Something the agent is working towards; ``status`` tracks it."""

    type_name: ClassVar[str] = "goal"
    type_code: ClassVar[int] = 1

    status: str = attrs.field(default="active", validator=_one_of(GOAL_STATUSES))
    due: int | None = attrs.field(default=None, validator=check_optional_ms)


@_guarded
@attrs.frozen(kw_only=True)
class Preference(Memory):
    """How someone likes things done."""

    type_name: ClassVar[str] = "preference"
    type_code: ClassVar[int] = 2


@_guarded
@attrs.frozen(kw_only=True)
class Constraint(Memory):
    """A rule that must hold (a gotcha, a policy, a hard limit)."""

    type_name: ClassVar[str] = "constraint"
    type_code: ClassVar[int] = 3


@_guarded
@attrs.frozen(kw_only=True)
class Fact(Memory):
    """Something true about the world or the project (architecture, decisions, context)."""

    type_name: ClassVar[str] = "fact"
    type_code: ClassVar[int] = 4


@_guarded
@attrs.frozen(kw_only=True)
class Pattern(Memory):
    """A recurring way of doing something that worked."""

    type_name: ClassVar[str] = "pattern"
    type_code: ClassVar[int] = 5


@_guarded
@attrs.frozen(kw_only=True)
class Event(Memory):
    """Something that happened: a message on a channel, a tool call, progress."""

    type_name: ClassVar[str] = "event"
    type_code: ClassVar[int] = 6

    channel: str | None = attrs.field(
        default=None, converter=nfc_or_none, validator=check_optional_short
    )
    occurred_at: int | None = attrs.field(default=None, validator=check_optional_ms)
    agent_id: str | None = attrs.field(
        default=None, converter=nfc_or_none, validator=check_optional_short
    )
    speaker: str | None = attrs.field(
        default=None, converter=nfc_or_none, validator=check_optional_short
    )
    kind: str | None = attrs.field(
        default=None, converter=nfc_or_none, validator=check_optional_short
    )
    call_id: str | None = attrs.field(
        default=None, converter=nfc_or_none, validator=check_optional_short
    )


def _content_hash(instance: ArtifactRef, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if type(value) is not str or not _CONTENT_HASH.match(value):
        raise ValidationError(
            "must be 'sha256:<64 hex>' or 'blake3:<64 hex>' in lowercase", field=attribute.name
        )
    content = instance.content
    if type(content) is str:  # a bad content is reported by its own validator
        algorithm, digest = value.split(":", 1)
        data = content.encode("utf-8", "surrogatepass")
        actual = hash_function(algorithm)(data).hex()
        if actual != digest:
            raise ValidationError(
                f"does not match the content ({algorithm}:{actual})", field=attribute.name
            )


@_guarded
@attrs.frozen(kw_only=True)
class ArtifactRef(Memory):
    """A reference to an artifact (a file, a document), optionally holding raw content."""

    type_name: ClassVar[str] = "artifact_ref"
    type_code: ClassVar[int] = 7

    path: str | None = attrs.field(
        default=None, converter=nfc_or_none, validator=check_optional_short
    )
    media_type: str | None = attrs.field(
        default=None, converter=nfc_or_none, validator=check_optional_short
    )
    content_hash: str | None = attrs.field(default=None, validator=_content_hash)
    # raw content (code) is kept byte-exact: no NFC, so hashes of files still match
    content: str | None = attrs.field(
        default=None, converter=_empty_to_none, validator=_optional_long
    )


def _cited(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not tuple or not all(type(u) is str for u in value):
        raise ValidationError("must be a list of memory URI strings", field=attribute.name)
    if not value:
        raise ValidationError("must cite at least one memory", field=attribute.name)
    for uri in value:
        check_utf8(uri, attribute.name)
        if len(uri) > MAX_SHORT_TEXT:
            raise ValidationError("a cited URI is too long", field=attribute.name)


def _as_tuple(value: Any) -> Any:
    return tuple(value) if type(value) is list else value


@_guarded
@attrs.frozen(kw_only=True)
class Attest(Memory):
    """An outcome and the memories that were cited when it was reached."""

    type_name: ClassVar[str] = "attest"
    type_code: ClassVar[int] = 8

    text: str = attrs.field(default="", converter=nfc, validator=_text(required=False))
    cited: tuple[str, ...] = attrs.field(converter=_as_tuple, validator=_cited)
    outcome: str = attrs.field(validator=_one_of(OUTCOMES))


def cited_uris(attest: Attest, actor: str) -> tuple[MemoryURI, ...]:
    """The memories ``attest`` cites, parsed: each must be a memory URI of ``actor``
    pinned to a version, as ``Cortex.attest`` writes them.

    The memory type itself accepts any short strings (so records stored before this check
    still decode); a store applies this check, and that each version exists, on every
    write of an Attest.

    Raises:
        ValidationError: field ``cited``, naming the first citation that is not such a URI.
    """
    found = []
    for text in attest.cited:
        try:
            uri = MemoryURI.parse(text)
        except URIError:
            raise ValidationError(
                f"{text!r} is not a memory URI (cx://<actor>/<ns>/<id-hex>@<version>)",
                field="cited",
            ) from None
        if uri.version is None:
            raise ValidationError(
                f"{text} is not pinned to a version (an attestation cites the version that"
                " was used: add @<version>)",
                field="cited",
            )
        if uri.actor != actor:
            raise ValidationError(
                f"{text} is a memory of actor {uri.actor!r}; an attestation of actor"
                f" {actor!r} cites memories of its own store",
                field="cited",
            )
        found.append(uri)
    return tuple(found)


def _weights(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not tuple or len(value) != WEIGHT_COUNT:
        raise ValidationError(
            f"must be {WEIGHT_COUNT} integers in parts per million", field=attribute.name
        )
    if not all(type(w) is int and 0 <= w <= WEIGHT_TOTAL for w in value):
        raise ValidationError("each weight must be an integer in 0..1000000", field=attribute.name)
    if sum(value) != WEIGHT_TOTAL:
        raise ValidationError(f"weights must sum to {WEIGHT_TOTAL}", field=attribute.name)


@_guarded
@attrs.frozen(kw_only=True)
class LearnWeights(Memory):
    """Salience weights (ppm) learned from an attested outcome."""

    type_name: ClassVar[str] = "learn_weights"
    type_code: ClassVar[int] = 9

    text: str = attrs.field(default="", converter=nfc, validator=_text(required=False))
    weights: tuple[int, ...] = attrs.field(converter=_as_tuple, validator=_weights)
    attest: str | None = attrs.field(
        default=None, converter=nfc_or_none, validator=check_optional_short
    )


MEMORY_TYPES: tuple[type[Memory], ...] = (
    Goal,
    Preference,
    Constraint,
    Fact,
    Pattern,
    Event,
    ArtifactRef,
    Attest,
    LearnWeights,
)
_BY_NAME: dict[str, type[Memory]] = {t.type_name: t for t in MEMORY_TYPES}


def type_by_name(name: object) -> type[Memory]:
    """The memory class called ``name`` (``"fact"``, ``"artifact_ref"``, ...).

    Raises:
        ValidationError: no such type.
    """
    try:
        return _BY_NAME[name]  # type: ignore[index]
    except (KeyError, TypeError):
        raise ValidationError(
            f"unknown memory type {name!r}; expected one of {', '.join(_BY_NAME)}", field="type"
        ) from None


# ---------------------------------------------------------------------------
# The canonical map: a record as plain data, and back. ``core.body`` turns maps into
# canonical bytes and holds the fast paths, which are held to these plain definitions.


def omitted(value: Any) -> bool:
    """Whether a field holding ``value`` is left out of a body: ``None``, ``False``, ``""``
    or ``()``."""
    return value is None or value is False or value == "" or value == ()


_SOURCE_FIELDS = tuple(f.name for f in attrs.fields(Source))


def source_to_map(source: Source) -> dict[str, Any]:
    """The map a body holds for ``source``: its fields that are not omitted."""
    return {name: v for name in _SOURCE_FIELDS if not omitted(v := getattr(source, name))}


def body_value(name: str, value: Any) -> Any:
    """Field ``name``'s ``value`` as a body holds it: a source as its map, a tuple as a list."""
    if name == "source":
        return source_to_map(value)
    if type(value) is tuple:
        return list(value)
    return value


_FIELD_NAMES: dict[type[Memory], tuple[str, ...]] = {
    t: tuple(f.name for f in attrs.fields(t)) for t in MEMORY_TYPES
}
#: per type: (field name, its canonical-CBOR key bytes) in canonical map order, "type" included
BODY_ORDER: dict[type[Memory], tuple[tuple[str, bytes], ...]] = {
    t: canonical_keys(("type", *names)) for t, names in _FIELD_NAMES.items()
}


def memory_fields(cls: type[Memory]) -> tuple[str, ...]:
    """The field names of a memory type, in declaration order."""
    return _FIELD_NAMES[cls]


def canonical_map(memory: Memory) -> dict[str, Any]:
    """The canonical map of a memory: its type and every field not omitted, in canonical
    key order (what :meth:`Memory.to_dict` returns).

    Raises:
        ValidationError: ``memory`` is not an instance of one of the nine types.
    """
    cls = type(memory)
    order = BODY_ORDER.get(cls)
    if order is None:
        raise ValidationError(f"{cls.__name__} is not one of the nine memory types", field="type")
    body: dict[str, Any] = {}
    for name, _ in order:
        if name == "type":
            body[name] = cls.type_name
        elif not omitted(value := getattr(memory, name)):
            body[name] = body_value(name, value)
    return body


def memory_from_map(body: Mapping[str, Any]) -> Memory:
    """Build the memory a map describes through the public constructors (what
    :meth:`Memory.from_dict` does).

    Raises:
        ValidationError: the map is not a valid body (unknown type or field, bad value).
    """
    if not isinstance(body, Mapping):
        raise ValidationError("a memory body must be a map", field="body")
    fields = dict(body)
    for name in fields:
        if type(name) is not str:
            raise ValidationError(f"field names must be text, not {name!r}", field="body")
    cls = type_by_name(fields.pop("type", None))
    source = fields.get("source")
    if source is not None:
        if not isinstance(source, Mapping) or not all(type(k) is str for k in source):
            raise ValidationError("must be a map with text keys", field="source")
        fields["source"] = Source(**source)
    return cls(**fields)
