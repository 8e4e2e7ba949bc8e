"""The error tree of cortexgraph.

Every failure the library reports on purpose is a :class:`CortexError`::

    CortexError
    ├── ValidationError        bad input; ``.field`` names the offending field
    │   ├── URIError           a malformed memory URI (fragments included)
    │   └── JournalFileError   a journal export that cannot be imported; ``.line``
    │                          names the line
    ├── NotFoundError          no such memory, version or environment
    ├── VersionConflictError   ``expected_version`` is stale
    ├── TombstonedError        the memory is tombstoned (J5)
    ├── UnboundedQueryError    a query with neither ``limit`` nor ``budget_tokens``
    ├── TooBroadQueryError     a query alternative with neither a type nor a tag, or
    │                          more than 64 alternatives
    ├── BatchNoJournalError    a store mutation without a journal entry (J2)
    ├── CorruptionError        stored bytes fail a check (J6, hashes, layout, LMDB's
    │                          own page checks); ``.table`` and ``.operation`` say where
    ├── VerificationError      a proof or scope bundle does not check out
    ├── ReadOnlyError          a mutation on a read-only handle
    ├── AlreadyOpenError       the environment is already open in this process
    ├── StorageError           the storage failed an operation (an I/O error, too many
    │   │                      readers, a directory that is not a store); ``.table`` and
    │   │                      ``.operation`` say where
    │   └── StorageFullError   space ran out: the disk is full, or the map reached its
    │                          largest size
    ├── EmbedderError          an embedder failed (HTTP status, bad response, wrong dim)
    ├── MissingExtraError      an optional dependency is not installed; ``.extra`` names
    │                          the extra to install (also an ``ImportError``)
    └── ExtractionError        an extractor failed (a command timed out or exited non-zero,
                               an HTTP endpoint refused, an answer held no candidates);
                               nothing was written

``ValidationError`` is also a ``ValueError``, ``NotFoundError`` a ``LookupError`` and
``MissingExtraError`` an ``ImportError``, so code that catches the built-in exceptions keeps
working. Any error raised inside a batch
rolls the whole batch back: nothing partial is ever visible or journaled.
"""

from __future__ import annotations

__all__ = [
    "AlreadyOpenError",
    "BatchNoJournalError",
    "CorruptionError",
    "CortexError",
    "EmbedderError",
    "ExtractionError",
    "JournalFileError",
    "MissingExtraError",
    "NotFoundError",
    "ReadOnlyError",
    "StorageError",
    "StorageFullError",
    "TombstonedError",
    "TooBroadQueryError",
    "URIError",
    "UnboundedQueryError",
    "ValidationError",
    "VerificationError",
    "VersionConflictError",
]


class CortexError(Exception):
    """Base class of every error cortexgraph raises on purpose."""


class ValidationError(CortexError, ValueError):
    """An input failed validation. ``field`` names the offending field when there is one."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class URIError(ValidationError):
    """A memory URI could not be parsed (fragments such as ``#latest`` are rejected)."""

    def __init__(self, message: str, *, uri: str | None = None) -> None:
        self.uri = uri
        super().__init__(f"{message} (in {uri!r})" if uri is not None else message, field="uri")


class NotFoundError(CortexError, LookupError):
    """The memory, version or environment does not exist."""


class VersionConflictError(CortexError):
    """``expected_version`` did not match the memory's current head version."""

    def __init__(self, message: str, *, expected: int, actual: int) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(message)


class TombstonedError(CortexError):
    """The memory is tombstoned; it can be resolved but not changed (J5)."""


class UnboundedQueryError(CortexError):
    """A query gave neither ``limit`` nor ``budget_tokens``."""


class TooBroadQueryError(CortexError):
    """A query disjunct names neither a type nor a tag, so it would scan everything."""


class BatchNoJournalError(CortexError):
    """A batch changed the store without appending a journal entry (invariant J2)."""


class _StoreError(CortexError):
    """An error about the store's bytes or disk; ``table`` and ``operation`` (e.g.
    ``"get"``, ``"commit"``) name where it happened, when known."""

    def __init__(
        self, message: str, *, table: str | None = None, operation: str | None = None
    ) -> None:
        self.table = table
        self.operation = operation
        super().__init__(message)


class CorruptionError(_StoreError):
    """Stored bytes failed a check: non-canonical encoding, a bad layout, a wrong hash, or
    one of LMDB's own page checks. ``table`` and ``operation`` name where, when known."""


class VerificationError(CortexError):
    """A proof, root or scope bundle did not verify."""


class ReadOnlyError(CortexError):
    """A mutation was attempted on a handle opened with ``readonly=True``."""


class AlreadyOpenError(CortexError):
    """This process already holds the LMDB environment open; reuse that handle."""


class StorageError(_StoreError):
    """The storage failed an operation: an I/O error from the disk, LMDB's reader table
    full, or a directory that is not a cortexgraph store. ``table`` and ``operation`` name
    where, when known. Nothing of a batch that failed this way is committed."""


class StorageFullError(StorageError):
    """Space ran out: the disk (or file system quota) is full, or the LMDB map reached its
    largest size. The batch that hit it is rolled back whole; free space and retry."""


class EmbedderError(CortexError):
    """An embedder could not produce vectors: the server refused the request, retries ran out,
    the response was malformed, or its dimension differs from the expected one.

    ``status`` is the HTTP status code when a server answered, else ``None``.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class MissingExtraError(CortexError, ImportError):
    """An optional dependency is missing. ``extra`` names the package extra that installs it,
    and the message says how: ``pip install 'cortexgraph[local]'``."""

    def __init__(self, message: str, *, extra: str) -> None:
        self.extra = extra
        super().__init__(message)


class JournalFileError(ValidationError):
    """A journal export (JSON Lines) cannot be imported: a line is cut, not JSON, too long,
    not UTF-8, misses fields, holds bytes that do not decode, disagrees with itself, or
    does not continue the store's journal; or the header names another actor, hash or
    format version. ``line`` is the 1-based line number (1 is the header) when one line
    is at fault, else None. An import that raises it changed nothing."""

    def __init__(self, message: str, *, line: int | None) -> None:
        self.line = line
        super().__init__(message if line is None else f"line {line}: {message}", field="file")


class ExtractionError(CortexError):
    """An extractor could not produce candidates: its command timed out or exited with a
    non-zero status, its HTTP endpoint refused or answered nonsense, or its answer held no
    JSON array of candidates. Nothing of that extraction is written to the store.

    ``status`` is the command's exit status or the HTTP status code when there was one.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)
