"""Memory URIs and the names they are built from.

    cx://<actor>/<ns>/<id-hex>@<version>     a pinned version
    cx://<actor>/<ns>/<id-hex>               the head (whatever version is current)

``actor`` and ``ns`` are names: 1 to 64 characters of ``a-z 0-9 . _ -`` starting with a
letter or digit (safe as directory names on every file system, and free of the NUL that
separates key fields). ``id-hex`` is 32 lowercase hex digits (16 bytes). ``version`` is a
positive decimal integer without leading zeros. Fragments (``#latest``), queries and
anything else are rejected with :class:`~cortexgraph.errors.URIError`, so one memory
version has exactly one URI string.
"""

from __future__ import annotations

import re

import attrs

from ..errors import URIError, ValidationError
from .keys import ID_SIZE

__all__ = ["MemoryURI", "check_name"]

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_URI = re.compile(r"cx://(?P<actor>[^/]*)/(?P<ns>[^/]*)/(?P<id>[^/@]*)(?:@(?P<version>[^/@]*))?")
_HEX_ID = re.compile(r"[0-9a-f]{32}")
_VERSION = re.compile(r"[1-9][0-9]{0,9}")
MAX_VERSION = 2**32 - 1


_VALID_NAMES: set[str] = set()


def check_name(value: object, field: str) -> str:
    """Return ``value`` if it is a valid actor or namespace name.

    Raises:
        ValidationError: naming ``field``.
    """
    if value in _VALID_NAMES and type(value) is str:
        return value
    if type(value) is not str:
        raise ValidationError(f"must be a string, not {type(value).__name__}", field=field)
    if not _NAME.fullmatch(value):
        raise ValidationError(
            f"{value!r} is not a valid name (1-64 of a-z 0-9 . _ -, starting with a letter"
            " or digit)",
            field=field,
        )
    if len(_VALID_NAMES) < 4096:
        _VALID_NAMES.add(value)
    return value


@attrs.frozen(repr=False)
class MemoryURI:
    """The address of a memory, pinned to a version or (``version=None``) its head."""

    actor: str
    ns: str
    id: bytes
    version: int | None = None

    def __attrs_post_init__(self) -> None:
        check_name(self.actor, "actor")
        check_name(self.ns, "ns")
        if type(self.id) is not bytes or len(self.id) != ID_SIZE:
            raise ValidationError(f"must be {ID_SIZE} bytes", field="id")
        v = self.version
        if v is not None and (type(v) is not int or not 1 <= v <= MAX_VERSION):
            raise ValidationError(f"must be a positive integer, not {v!r}", field="version")

    @classmethod
    def trusted(cls, actor: str, ns: str, memory_id: bytes, version: int | None) -> MemoryURI:
        """Build a URI from parts the caller has already validated (the store's hot paths)."""
        uri = object.__new__(cls)
        _SET_ACTOR(uri, actor)  # the slots' own setters: half the cost of __setattr__
        _SET_NS(uri, ns)
        _SET_ID(uri, memory_id)
        _SET_VERSION(uri, version)
        return uri

    @classmethod
    def parse(cls, text: str) -> MemoryURI:
        """Parse ``cx://actor/ns/id[@version]``.

        Raises:
            URIError: anything malformed, including any ``#fragment`` or ``?query``.
        """
        if type(text) is not str:
            raise URIError(f"a memory URI must be a string, not {type(text).__name__}")
        if "#" in text:
            raise URIError(
                "fragments such as '#latest' are not allowed; pin with @version", uri=text
            )
        if "?" in text:
            raise URIError("query strings are not allowed", uri=text)
        m = _URI.fullmatch(text)
        if m is None:
            raise URIError("expected cx://<actor>/<ns>/<id-hex>[@<version>]", uri=text)
        actor, ns, hex_id, version = m.group("actor", "ns", "id", "version")
        for value, field in ((actor, "actor"), (ns, "ns")):
            if not _NAME.fullmatch(value):
                raise URIError(f"{field} {value!r} is not a valid name", uri=text)
        if not _HEX_ID.fullmatch(hex_id):
            raise URIError("the id must be 32 lowercase hex digits", uri=text)
        if version is not None and (not _VERSION.fullmatch(version) or int(version) > MAX_VERSION):
            raise URIError("the version must be a positive integer without leading zeros", uri=text)
        return cls(actor, ns, bytes.fromhex(hex_id), None if version is None else int(version))

    @property
    def id_hex(self) -> str:
        """The id as 32 lowercase hex digits."""
        return self.id.hex()

    @property
    def head(self) -> MemoryURI:
        """The same memory without a version pin (it resolves to the current head)."""
        return MemoryURI.trusted(self.actor, self.ns, self.id, None)  # parts already checked

    def at_version(self, version: int) -> MemoryURI:
        """The same memory pinned to ``version``."""
        return MemoryURI(self.actor, self.ns, self.id, version)

    def __repr__(self) -> str:
        return f"MemoryURI({str(self)!r})"

    def __str__(self) -> str:
        base = f"cx://{self.actor}/{self.ns}/{self.id.hex()}"
        return base if self.version is None else f"{base}@{self.version}"


if tuple(f.name for f in attrs.fields(MemoryURI)) != ("actor", "ns", "id", "version"):
    raise TypeError("MemoryURI changed fields; update MemoryURI.trusted")  # pragma: no cover
_SET_ACTOR, _SET_NS, _SET_ID, _SET_VERSION = (
    MemoryURI.__dict__[field.name].__set__ for field in attrs.fields(MemoryURI)
)
