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

Body encoding (the canonical CBOR map hashed into ids and stored in versions): text keys,
``"type"`` first in meaning, every field whose value is ``None``, ``False``, ``""`` or
``()`` omitted, ``source`` as a nested map with the same rule. :func:`memory_from_body`
accepts exactly what :func:`memory_to_body` produces; anything else is corruption.
"""

from __future__ import annotations

import functools
import math
import operator
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import attrs

from ..errors import CorruptionError, URIError, ValidationError
from .codec import _encode_float, canonical_keys, encode_head, encode_into
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
    "check_utf8",
    "cited_uris",
    "memory_from_body",
    "memory_to_body",
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


def _nfc(value: Any) -> Any:
    if type(value) is str and not unicodedata.is_normalized("NFC", value):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value  # the validator reports it
        return unicodedata.normalize("NFC", value)
    return value


def _empty_to_none(value: Any) -> Any:
    return None if value == "" else value


def _nfc_or_none(value: Any) -> Any:
    if value == "":
        return None
    return _nfc(value)


def _normalise_tags(value: Any) -> Any:
    if isinstance(value, (list, tuple, set, frozenset)):
        if not all(type(tag) is str for tag in value):
            return value  # the validator reports it
        return tuple(sorted({_normalise_tag(tag) for tag in value}))
    return value


def _normalise_tag(tag: str) -> str:
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


def _normalise_confidence(value: Any) -> Any:
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

    check.text_required = required  # type: ignore[attr-defined]  # read by _fast_builder
    return check


def _optional_short(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
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


def _tags(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
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


def _unit_float(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
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

    check.bounds = (lo, hi)  # type: ignore[attr-defined]  # read by _fast_builder
    return check


def _optional_ms(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if type(value) is not int:
        raise ValidationError(
            f"must be integer milliseconds since the epoch or None, not {type(value).__name__}",
            field=attribute.name,
        )
    if not 0 <= value <= MAX_MS:
        raise ValidationError(f"must be between 0 and 2**63-1, not {value}", field=attribute.name)


def _bool(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not bool:
        raise ValidationError(f"must be True or False, not {value!r}", field=attribute.name)


def _one_of(choices: tuple[str, ...]) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in choices or type(value) is not str:
            raise ValidationError(
                f"must be one of {', '.join(choices)}, not {value!r}", field=attribute.name
            )

    check.choices = choices  # type: ignore[attr-defined]  # read by _fast_builder
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
        default=None, converter=_nfc_or_none, validator=_optional_short
    )
    branch: str | None = attrs.field(
        default=None, converter=_nfc_or_none, validator=_optional_short
    )
    cwd: str | None = attrs.field(default=None, converter=_nfc_or_none, validator=_optional_short)


def _source(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and type(value) is not Source:
        raise ValidationError(
            f"must be a cortexgraph.Source or None, not {type(value).__name__}",
            field=attribute.name,
        )


def _valid_interval(instance: Memory, _: attrs.Attribute[Any], value: Any) -> None:
    _optional_ms(instance, _, value)
    if value is not None and instance.valid_from is not None and value < instance.valid_from:
        raise ValidationError("must not be before valid_from", field="valid_to")


@attrs.frozen(kw_only=True)
class Memory:
    """The fields every memory type shares. Instantiate one of the nine subclasses."""

    type_name: ClassVar[str] = "memory"
    type_code: ClassVar[int] = 0

    text: str = attrs.field(converter=_nfc, validator=_text(required=True))
    summary: str | None = attrs.field(
        default=None, converter=_nfc_or_none, validator=_optional_short
    )
    tags: tuple[str, ...] = attrs.field(default=(), converter=_normalise_tags, validator=_tags)
    confidence: float = attrs.field(
        default=1.0, converter=_normalise_confidence, validator=_unit_float
    )
    priority: int = attrs.field(default=5, validator=_int_range(1, 10))
    pinned: bool = attrs.field(default=False, validator=_bool)
    source: Source | None = attrs.field(default=None, validator=_source)
    valid_from: int | None = attrs.field(default=None, validator=_optional_ms)
    valid_to: int | None = attrs.field(default=None, validator=_valid_interval)

    def to_dict(self) -> dict[str, Any]:
        """The canonical map of this memory: what is journaled and hashed.

        >>> Fact(text="hi", tags=["B", "a"]).to_dict()
        {'tags': ['a', 'b'], 'text': 'hi', 'type': 'fact', 'priority': 5, 'confidence': 1.0}
        """
        return memory_to_body(self)

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Memory:
        """Build the memory a map describes; ``data["type"]`` picks the class.

        Raises:
            ValidationError: an unknown type or field, or a bad value.
        """
        return memory_from_body(data)


@_guarded
@attrs.frozen(kw_only=True)
class Goal(Memory):
    """Something the agent is working towards; ``status`` tracks it."""

    type_name: ClassVar[str] = "goal"
    type_code: ClassVar[int] = 1

    status: str = attrs.field(default="active", validator=_one_of(GOAL_STATUSES))
    due: int | None = attrs.field(default=None, validator=_optional_ms)


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
        default=None, converter=_nfc_or_none, validator=_optional_short
    )
    occurred_at: int | None = attrs.field(default=None, validator=_optional_ms)
    agent_id: str | None = attrs.field(
        default=None, converter=_nfc_or_none, validator=_optional_short
    )
    speaker: str | None = attrs.field(
        default=None, converter=_nfc_or_none, validator=_optional_short
    )
    kind: str | None = attrs.field(default=None, converter=_nfc_or_none, validator=_optional_short)
    call_id: str | None = attrs.field(
        default=None, converter=_nfc_or_none, validator=_optional_short
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

    path: str | None = attrs.field(default=None, converter=_nfc_or_none, validator=_optional_short)
    media_type: str | None = attrs.field(
        default=None, converter=_nfc_or_none, validator=_optional_short
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

    text: str = attrs.field(default="", converter=_nfc, validator=_text(required=False))
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

    text: str = attrs.field(default="", converter=_nfc, validator=_text(required=False))
    weights: tuple[int, ...] = attrs.field(converter=_as_tuple, validator=_weights)
    attest: str | None = attrs.field(
        default=None, converter=_nfc_or_none, validator=_optional_short
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
# Body encoding


def _omit(value: Any) -> bool:
    return value is None or value is False or value == "" or value == ()


_SOURCE_FIELDS = tuple(f.name for f in attrs.fields(Source))


def _source_to_map(source: Source) -> dict[str, Any]:
    return {name: v for name in _SOURCE_FIELDS if not _omit(v := getattr(source, name))}


_FIELD_NAMES: dict[type[Memory], tuple[str, ...]] = {
    t: tuple(f.name for f in attrs.fields(t)) for t in MEMORY_TYPES
}
#: per type: (field name, its canonical-CBOR key bytes) in canonical map order, "type" included
_BODY_ORDER: dict[type[Memory], tuple[tuple[str, bytes], ...]] = {
    t: canonical_keys(("type", *names)) for t, names in _FIELD_NAMES.items()
}


# ---------------------------------------------------------------------------
# Fast paths. The hot read path decodes stored bodies into memories and re-encodes them to
# check canonical form; the attrs constructor (``_guarded``, per-field converters and
# validators) and the generic encoder loop dominate it. So:
#
# - ``memory_from_body`` first tries a per-class builder. For each field it accepts a
#   value outright only when a quick inline check implies that the real converter would
#   leave it alone (or do what the builder does) and the real validator would pass it
#   (ASCII text, in-range numbers, ...); other values go through the real converter and
#   validator. On anything doubtful it returns ``None`` (or raises), and the caller runs
#   the reference path, so errors are always exactly the reference path's;
# - ``encode_body`` runs the reference loop with the generic per-field step specialised by
#   value type, and the encoding of a ``Source`` memoised by identity.
#
# No code generation (the core may not call exec): the common fields are written out by
# hand, and each builder checks at import that its class declares them as assumed.
# tests/test_taxonomy_fast.py holds both to the reference paths.

_MISSING: Any = object()
_new = object.__new__
_setattr = object.__setattr__
_CACHE_LIMIT = 4096

# kinds of type-specific fields, by how the builder treats them
_SHORT, _MS, _CHOICE, _OTHER = range(4)


def _setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """A function setting slot ``name`` of an instance of ``cls`` (frozen or not)."""
    slot = getattr(cls, name, None)
    if type(slot).__name__ == "member_descriptor":
        return slot.__set__  # type: ignore[union-attr,no-any-return]
    return functools.partial(_setattr_by_name, name)  # pragma: no cover - all are slotted


def _setattr_by_name(name: str, instance: Any, value: Any) -> None:  # pragma: no cover
    _setattr(instance, name, value)


def _short(value: Any, attribute: attrs.Attribute[Any]) -> Any:
    """An optional single-line field: ``_nfc_or_none`` then ``_optional_short``."""
    if (
        type(value) is str
        and value.isascii()
        and 0 < len(value) <= MAX_SHORT_TEXT
        and "\n" not in value
        and "\r" not in value
    ):
        return value  # ASCII is NFC; not empty, so not None; passes the validator
    value = _nfc_or_none(value)
    _optional_short(None, attribute, value)
    return value


def _is(field: attrs.Attribute[Any], converter: Any, validator: Any) -> bool:
    return bool(field.converter is converter and field.validator is validator)


def _fast_source_builder() -> Callable[[dict[Any, Any]], Source | None]:
    a = attrs.fields_dict(Source)
    assert set(a) == {"origin", "session", "branch", "cwd"}
    assert a["origin"].validator.choices == ORIGINS and a["origin"].default == "system"  # type: ignore[union-attr]
    assert all(_is(a[n], _nfc_or_none, _optional_short) for n in ("session", "branch", "cwd"))
    known = frozenset(a)
    a_origin, a_session, a_branch, a_cwd = a["origin"], a["session"], a["branch"], a["cwd"]
    check_origin = a_origin.validator
    s_origin, s_session, s_branch, s_cwd = (_setter(Source, n) for n in a)

    def build(data: dict[Any, Any]) -> Source | None:
        for key in data:
            if type(key) is not str or key not in known:
                return None
        get = data.get
        origin = get("origin", "system")
        if not (type(origin) is str and origin in ORIGINS):
            check_origin(None, a_origin, origin)  # type: ignore[misc]
        session = get("session")
        if session is not None:
            session = _short(session, a_session)
        branch = get("branch")
        if branch is not None:
            branch = _short(branch, a_branch)
        cwd = get("cwd")
        if cwd is not None:
            cwd = _short(cwd, a_cwd)
        source = _new(Source)
        s_origin(source, origin)
        s_session(source, session)
        s_branch(source, branch)
        s_cwd(source, cwd)
        return source

    return build


_build_source = _fast_source_builder()
#: Sources built from maps, by the map's items: memories share a few sources, and sharing
#: the (immutable) object also lets ``encode_body`` reuse its encoding. Bounded.
_SOURCES: dict[tuple[Any, ...], Source] = {}
#: id(source) -> (source, its map, its encoding), for the sources in ``_SOURCES``; the entry
#: keeps the source alive, so its id is not reused while the entry is there.
_SOURCE_ENCODINGS: dict[int, tuple[Source, dict[str, Any], bytes]] = {}


def _source_from_map(data: dict[Any, Any]) -> Source | None:
    items = tuple(data.items())
    source = _SOURCES.get(items)  # unhashable values raise: the caller falls back
    if source is not None:
        # equal items are the same items only when they are exact str (or None)
        for key, value in items:
            if type(key) is not str or (type(value) is not str and value is not None):
                return _build_source(data)
        return source
    source = _build_source(data)
    if source is not None:
        if len(_SOURCES) >= _CACHE_LIMIT:
            _SOURCES.clear()
            _SOURCE_ENCODINGS.clear()
        _SOURCES[items] = source
        value = _source_to_map(source)
        out: list[bytes] = []
        encode_into(value, out)
        _SOURCE_ENCODINGS[id(source)] = (source, value, b"".join(out))
    return source


_COMMON: tuple[str, ...] = ("text", "summary", "tags", "confidence", "priority", "pinned")
_COMMON += ("source", "valid_from", "valid_to")


def _fast_builder(cls: type[Memory]) -> Callable[[dict[Any, Any]], Memory | None] | None:
    """The builder of ``cls`` (see above), or ``None`` if its fields are not as assumed."""
    a = attrs.fields_dict(cls)
    text = a["text"]
    if not (
        set(_COMMON) <= set(a)
        and _is(text, _nfc, text.validator)
        and hasattr(text.validator, "text_required")
        and getattr(text.validator, "text_required", None) is (text.default is attrs.NOTHING)
        and text.default in (attrs.NOTHING, "")
        and _is(a["summary"], _nfc_or_none, _optional_short)
        and a["summary"].default is None
        and _is(a["tags"], _normalise_tags, _tags)
        and a["tags"].default == ()
        and _is(a["confidence"], _normalise_confidence, _unit_float)
        and a["confidence"].default == 1.0
        and a["priority"].converter is None
        and getattr(a["priority"].validator, "bounds", None) == (1, 10)
        and a["priority"].default == 5
        and _is(a["pinned"], None, _bool)
        and a["pinned"].default is False
        and _is(a["source"], None, _source)
        and a["source"].default is None
        and _is(a["valid_from"], None, _optional_ms)
        and a["valid_from"].default is None
        and _is(a["valid_to"], None, _valid_interval)
        and a["valid_to"].default is None
    ):
        return None  # pragma: no cover - the reference path serves such a class
    known = frozenset(a) | {"type"}
    text_required = text.default is attrs.NOTHING
    check_text: Any = text.validator
    a_text, a_summary, a_tags = text, a["summary"], a["tags"]
    a_confidence, a_priority, a_pinned, a_valid_from = (
        a["confidence"],
        a["priority"],
        a["pinned"],
        a["valid_from"],
    )
    (s_text, s_summary, s_tags, s_confidence, s_priority, s_pinned, s_source) = (
        _setter(cls, n) for n in _COMMON[:7]
    )
    s_valid_from, s_valid_to = _setter(cls, "valid_from"), _setter(cls, "valid_to")
    extras: list[tuple[str, int, Any, Any, Any, Any]] = []
    for name, f in a.items():
        if name in _COMMON:
            continue
        if f.default is attrs.NOTHING:
            default = _MISSING
        else:
            converter: Any = f.converter
            default = converter(f.default) if converter is not None else f.default
        if _is(f, _nfc_or_none, _optional_short):
            kind = _SHORT
        elif _is(f, None, _optional_ms):
            kind = _MS
        elif f.converter is None and hasattr(f.validator, "choices"):
            kind = _CHOICE
        else:
            kind = _OTHER  # the real converter now, the real validator once built
        extras.append((name, kind, default, f.converter, f.validator, f))
    extra_setters = tuple(_setter(cls, e[0]) for e in extras)
    post = tuple(i for i, e in enumerate(extras) if e[1] == _OTHER)

    def build(body: dict[Any, Any]) -> Memory | None:
        for key in body:
            if type(key) is not str or key not in known:
                return None
        get = body.get
        text = get("text", _MISSING)
        if text is _MISSING:
            if text_required:
                return None
            text = ""
        elif not (
            type(text) is str
            and text.isascii()  # ASCII is NFC, and its UTF-8 is as long as it is
            and len(text) <= MAX_TEXT_BYTES
            and (not text_required or text.strip())
        ):
            text = _nfc(text)
            check_text(None, a_text, text)
        summary = get("summary")
        if summary is not None:
            summary = _short(summary, a_summary)
        tags = get("tags", _MISSING)
        if tags is _MISSING:
            tags = ()
        elif type(tags) is list and len(tags) <= MAX_TAGS:
            ordered = True  # lowercase, sorted and unique already, as in a stored body
            previous = ""
            for tag in tags:
                if not (
                    type(tag) is str
                    and tag.isascii()  # then NFC, and _normalise_tag is str.lower
                    and 0 < len(tag) <= MAX_TAG_LENGTH
                    and tag.isprintable()  # no ASCII control character ...
                    and " " not in tag  # ... nor whitespace
                ):
                    tags = _normalise_tags(tags)
                    _tags(None, a_tags, tags)
                    break
                if ordered and not (tag > previous and tag.islower()):
                    ordered = False
                previous = tag
            else:
                tags = tuple(tags) if ordered else tuple(sorted({tag.lower() for tag in tags}))
        else:
            tags = _normalise_tags(tags)
            _tags(None, a_tags, tags)
        confidence = get("confidence", 1.0)
        if not (type(confidence) is float and 0.0 < confidence <= 1.0):
            confidence = _normalise_confidence(confidence)
            _unit_float(None, a_confidence, confidence)
        priority = get("priority", 5)
        if not (type(priority) is int and 1 <= priority <= 10):
            a_priority.validator(None, a_priority, priority)  # type: ignore[misc]
        pinned = get("pinned", False)
        if pinned is not True and pinned is not False:
            _bool(None, a_pinned, pinned)
        source = get("source")
        if source is not None:
            if type(source) is not dict:
                return None
            source = _source_from_map(source)
            if source is None:
                return None
        valid_from = get("valid_from")
        if valid_from is not None and not (type(valid_from) is int and 0 <= valid_from <= MAX_MS):
            _optional_ms(None, a_valid_from, valid_from)
        valid_to = get("valid_to")
        if valid_to is not None and not (
            type(valid_to) is int
            and 0 <= valid_to <= MAX_MS
            and (valid_from is None or valid_to >= valid_from)
        ):
            return None
        values = []
        for name, kind, default, converter, validator, attribute in extras:
            value = get(name, _MISSING)
            if value is _MISSING:
                if default is _MISSING:
                    return None
                value = default
            elif kind == _SHORT:
                value = _short(value, attribute)
            elif kind == _MS:
                if value is not None and not (type(value) is int and 0 <= value <= MAX_MS):
                    validator(None, attribute, value)
            elif kind == _CHOICE:
                if not (type(value) is str and value in validator.choices):
                    validator(None, attribute, value)
            elif converter is not None:
                value = converter(value)
            values.append(value)
        memory = _new(cls)
        s_text(memory, text)
        s_summary(memory, summary)
        s_tags(memory, tags)
        s_confidence(memory, confidence)
        s_priority(memory, priority)
        s_pinned(memory, pinned)
        s_source(memory, source)
        s_valid_from(memory, valid_from)
        s_valid_to(memory, valid_to)
        for set_slot, value in zip(extra_setters, values, strict=True):
            set_slot(memory, value)
        for i in post:
            _, _, _, _, validator, attribute = extras[i]
            validator(memory, attribute, values[i])
        return memory

    return build


def _encode_field(
    name: str, key_bytes: bytes, value: Any, body: dict[str, Any], out: list[bytes]
) -> None:
    """The generic per-field step of :func:`encode_body` (the reference encoder's)."""
    if value is None or value is False or value == "" or value == ():
        return
    if name == "source":
        value = _source_to_map(value)
    elif type(value) is tuple:
        value = list(value)
    body[name] = value
    out.append(key_bytes)
    encode_into(value, out)


_STR_HEADS = tuple(encode_head(3, n) for n in range(24))
_ARRAY_HEADS = tuple(encode_head(4, n) for n in range(24))


def _encode_source(source: Source) -> tuple[dict[str, Any], bytes]:
    known = _SOURCE_ENCODINGS.get(id(source))
    if known is not None and known[0] is source:
        return dict(known[1]), known[2]
    value = _source_to_map(source)
    out: list[bytes] = []
    encode_into(value, out)
    return value, b"".join(out)


def _encode_fast(
    memory: Memory, plan: tuple[tuple[tuple[str, bytes], ...], Callable[[Memory], Any]]
) -> tuple[dict[str, Any], bytes]:
    """:func:`_encode_body_reference` with :func:`_encode_field` specialised by type."""
    body: dict[str, Any] = {}
    out: list[bytes] = [b""]
    append = out.append
    order, get_values = plan
    for (name, key_bytes), value in zip(order, get_values(memory)):  # noqa: B905
        kind = type(value)
        if kind is str:
            if not value:
                continue
            if name == "source":  # only with validators off; fails as the reference does
                _encode_field(name, key_bytes, value, body, out)
                continue
            body[name] = value
            append(key_bytes)
            raw = value.encode("utf-8")
            n = len(raw)
            append(_STR_HEADS[n] if n < 24 else encode_head(3, n))
            append(raw)
        elif value is None or value is False:
            continue
        elif name == "source":
            if kind is Source:
                body[name], encoded = _encode_source(value)
                append(key_bytes)
                append(encoded)
            else:
                _encode_field(name, key_bytes, value, body, out)
        elif kind is int:
            body[name] = value
            append(key_bytes)
            append(encode_head(0, value) if value >= 0 else encode_head(1, -1 - value))
        elif kind is float:
            body[name] = value
            append(key_bytes)
            append(_encode_float(value))
        elif kind is tuple:
            if not value:
                continue
            items = list(value)
            body[name] = items
            append(key_bytes)
            n = len(items)
            append(_ARRAY_HEADS[n] if n < 24 else encode_head(4, n))
            for item in items:
                if type(item) is str:
                    raw = item.encode("utf-8")
                    n = len(raw)
                    append(_STR_HEADS[n] if n < 24 else encode_head(3, n))
                    append(raw)
                else:
                    encode_into(item, out)
        elif value is True:
            body[name] = value
            append(key_bytes)
            append(b"\xf5")
        else:
            _encode_field(name, key_bytes, value, body, out)
    out[0] = encode_head(5, len(body))
    return body, b"".join(out)


#: per type: its canonical field order, and a getter of the values in that order (the
#: "type" entry gets the type name)
_ENCODE_PLANS: dict[type[Memory], tuple[tuple[tuple[str, bytes], ...], Any]] = {
    t: (order, operator.attrgetter(*("type_name" if n == "type" else n for n, _ in order)))
    for t, order in _BODY_ORDER.items()
}
_BUILDERS: dict[str, Callable[[dict[Any, Any]], Memory | None]] = {
    t.type_name: builder for t in MEMORY_TYPES if (builder := _fast_builder(t)) is not None
}


def memory_to_body(memory: Memory) -> dict[str, Any]:
    """The canonical map of a memory: its type and every non-empty field."""
    return encode_body(memory)[0]


def encode_body(memory: Memory) -> tuple[dict[str, Any], bytes]:
    """The canonical map of a memory and its canonical CBOR bytes, in one pass.

    ``encode_body(m)[1] == encode(memory_to_body(m))``; the map is built in canonical key
    order, so the bytes need no sorting.
    """
    plan = _ENCODE_PLANS.get(type(memory))
    if plan is None:
        return _encode_body_reference(memory)  # raises
    return _encode_fast(memory, plan)


def _encode_body_reference(memory: Memory) -> tuple[dict[str, Any], bytes]:
    """:func:`encode_body` as a plain loop: the reference the generated encoders follow."""
    cls = type(memory)
    order = _BODY_ORDER.get(cls)
    if order is None:
        raise ValidationError(f"{cls.__name__} is not one of the nine memory types", field="type")
    body: dict[str, Any] = {}
    out: list[bytes] = [b""]
    for name, key_bytes in order:
        if name == "type":
            body[name] = cls.type_name
            out.append(key_bytes)
            encode_into(cls.type_name, out)
        else:
            _encode_field(name, key_bytes, getattr(memory, name), body, out)
    out[0] = encode_head(5, len(body))
    return body, b"".join(out)


def memory_from_body(body: Mapping[str, Any]) -> Memory:
    """Rebuild a memory from a map made by :func:`memory_to_body`.

    Raises:
        ValidationError: the map is not a valid body (unknown type or field, bad value).
    """
    if type(body) is dict:
        try:
            build = _BUILDERS.get(body.get("type"))  # type: ignore[arg-type]
            if build is not None:
                memory = build(body)
                if memory is not None:
                    return memory
        except Exception:
            pass
    return _memory_from_body_reference(body)


def _memory_from_body_reference(body: Mapping[str, Any]) -> Memory:
    """:func:`memory_from_body` through the public constructors (the reference path)."""
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


def check_body(body: Mapping[str, Any], what: str) -> Memory:
    """Decode a stored body, turning validation failures into ``CorruptionError``.

    A stored body must also be exactly the canonical body of the memory it decodes to,
    so that a stored ``"pinned": false`` or an unsorted tag list is reported, not fixed.
    """
    try:
        memory = memory_from_body(body)
    except ValidationError as exc:
        raise CorruptionError(f"{what} holds an invalid memory: {exc}") from None
    if memory_to_body(memory) != body:
        raise CorruptionError(f"{what} is not a canonical memory body")
    return memory


def memory_fields(cls: type[Memory]) -> tuple[str, ...]:
    """The field names of a memory type, in declaration order."""
    return _FIELD_NAMES[cls]
