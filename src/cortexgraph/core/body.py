"""Memory bodies: the canonical bytes of a record, and the fast paths that make and read them.

A body is the canonical map of a memory (:func:`~cortexgraph.core.taxonomy.canonical_map`:
text keys, ``"type"`` included, every field whose value is ``None``, ``False``, ``""`` or
``()`` omitted, ``source`` as a nested map with the same rule) encoded as canonical CBOR.
Its bytes are hashed into ids and stored in versions. :func:`memory_from_body` accepts
exactly what :func:`memory_to_body` produces; :func:`check_body` reports anything else
read from a store as corruption.

Writing a memory encodes its body (:func:`encode_body`), and every read that verifies a
stored body decodes it (:func:`memory_from_body`) and re-encodes it to compare bytes. Both
run per-class fast paths; each is held to a plain reference (the record's public
constructors and :func:`~cortexgraph.core.taxonomy.canonical_map`) by
``tests/test_body_fast.py``.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ..errors import CorruptionError, ValidationError
from .codec import encode_float, encode_head, encode_into, encode_trusted
from .taxonomy import (
    BODY_ORDER,
    MAX_MS,
    MAX_SHORT_TEXT,
    MAX_TAG_LENGTH,
    MAX_TAGS,
    MAX_TEXT_BYTES,
    MEMORY_TYPES,
    ORIGINS,
    Memory,
    Source,
    body_value,
    canonical_map,
    check_bool,
    check_optional_ms,
    check_optional_short,
    check_source,
    check_tags,
    check_unit_float,
    check_valid_interval,
    memory_from_map,
    nfc,
    nfc_or_none,
    normalise_confidence,
    normalise_tags,
    omitted,
    source_to_map,
)

__all__ = [
    "check_body",
    "encode_body",
    "memory_from_body",
    "memory_to_body",
]

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
    """An optional single-line field: ``nfc_or_none`` then ``check_optional_short``."""
    if (
        type(value) is str
        and value.isascii()
        and 0 < len(value) <= MAX_SHORT_TEXT
        and "\n" not in value
        and "\r" not in value
    ):
        return value  # ASCII is NFC; not empty, so not None; passes the validator
    value = nfc_or_none(value)
    check_optional_short(None, attribute, value)
    return value


def _is(field: attrs.Attribute[Any], converter: Any, validator: Any) -> bool:
    return bool(field.converter is converter and field.validator is validator)


def _fast_source_builder() -> Callable[[dict[Any, Any]], Source | None]:
    a = attrs.fields_dict(Source)
    assert set(a) == {"origin", "session", "branch", "cwd"}
    assert a["origin"].validator.choices == ORIGINS and a["origin"].default == "system"  # type: ignore[union-attr]
    assert all(_is(a[n], nfc_or_none, check_optional_short) for n in ("session", "branch", "cwd"))
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
        value = source_to_map(source)
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
        and _is(text, nfc, text.validator)
        and hasattr(text.validator, "text_required")
        and getattr(text.validator, "text_required", None) is (text.default is attrs.NOTHING)
        and text.default in (attrs.NOTHING, "")
        and _is(a["summary"], nfc_or_none, check_optional_short)
        and a["summary"].default is None
        and _is(a["tags"], normalise_tags, check_tags)
        and a["tags"].default == ()
        and _is(a["confidence"], normalise_confidence, check_unit_float)
        and a["confidence"].default == 1.0
        and a["priority"].converter is None
        and getattr(a["priority"].validator, "bounds", None) == (1, 10)
        and a["priority"].default == 5
        and _is(a["pinned"], None, check_bool)
        and a["pinned"].default is False
        and _is(a["source"], None, check_source)
        and a["source"].default is None
        and _is(a["valid_from"], None, check_optional_ms)
        and a["valid_from"].default is None
        and _is(a["valid_to"], None, check_valid_interval)
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
        if _is(f, nfc_or_none, check_optional_short):
            kind = _SHORT
        elif _is(f, None, check_optional_ms):
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
            text = nfc(text)
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
                    and tag.isascii()  # then NFC, and normalise_tag is str.lower
                    and 0 < len(tag) <= MAX_TAG_LENGTH
                    and tag.isprintable()  # no ASCII control character ...
                    and " " not in tag  # ... nor whitespace
                ):
                    tags = normalise_tags(tags)
                    check_tags(None, a_tags, tags)
                    break
                if ordered and not (tag > previous and tag.islower()):
                    ordered = False
                previous = tag
            else:
                tags = tuple(tags) if ordered else tuple(sorted({tag.lower() for tag in tags}))
        else:
            tags = normalise_tags(tags)
            check_tags(None, a_tags, tags)
        confidence = get("confidence", 1.0)
        if not (type(confidence) is float and 0.0 < confidence <= 1.0):
            confidence = normalise_confidence(confidence)
            check_unit_float(None, a_confidence, confidence)
        priority = get("priority", 5)
        if not (type(priority) is int and 1 <= priority <= 10):
            a_priority.validator(None, a_priority, priority)  # type: ignore[misc]
        pinned = get("pinned", False)
        if pinned is not True and pinned is not False:
            check_bool(None, a_pinned, pinned)
        source = get("source")
        if source is not None:
            if type(source) is not dict:
                return None
            source = _source_from_map(source)
            if source is None:
                return None
        valid_from = get("valid_from")
        if valid_from is not None and not (type(valid_from) is int and 0 <= valid_from <= MAX_MS):
            check_optional_ms(None, a_valid_from, valid_from)
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
    """The generic per-field step: what :func:`canonical_map` does to one field, encoded."""
    if omitted(value):
        return
    value = body_value(name, value)
    body[name] = value
    out.append(key_bytes)
    encode_into(value, out)


_STR_HEADS = tuple(encode_head(3, n) for n in range(24))
_ARRAY_HEADS = tuple(encode_head(4, n) for n in range(24))


def _encode_source(source: Source) -> tuple[dict[str, Any], bytes]:
    known = _SOURCE_ENCODINGS.get(id(source))
    if known is not None and known[0] is source:
        return dict(known[1]), known[2]
    value = source_to_map(source)
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
            append(encode_float(value))
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
    for t, order in BODY_ORDER.items()
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
    """:func:`encode_body` the plain way, the reference the fast encoder is held to: the
    record's canonical map, encoded by the generic canonical encoder."""
    body = canonical_map(memory)
    return body, encode_trusted(body)


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
    return memory_from_map(body)


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
