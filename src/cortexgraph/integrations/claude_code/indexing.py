"""Prose-code pairing: index Python source as ``code_description`` memories and their code.

Each public symbol of a Python file (read with :mod:`ast`, never imported) becomes a pair:

- an :class:`~cortexgraph.ArtifactRef` holding the symbol's source byte-exact in
  ``content`` (a class's with each public member, indexed on its own, replaced by a comment
  line ``# <name>: indexed on its own``, so that editing a method changes the method
  alone, while adding or removing one changes its class too; private methods stay in
  their class) (never embedded: only ``text`` reaches an embedder), its ``path`` relative
  to the indexed base, its ``content_hash`` (``sha256:``) and, in ``text``, its kind,
  qualified name and line range; tags ``code`` and ``code-index``;
- a :class:`~cortexgraph.Fact` tagged ``code_description`` (the plugin's type, mapped as
  the claude-memory-sqlite importer maps it) and ``code-index``, whose prose is the
  signature, the docstring's first paragraph and the names the symbol calls (for a class,
  its public methods);

linked ``ArtifactRef --source_of--> Fact`` (the source is what the description
describes), so that recall attaches the code to a hit on its description.

Public symbols: the module-level functions and classes whose names do not start with
``_``, and, inside such classes (recursively), the methods and classes whose names do not
start with ``_``. Definitions nested in functions, or under module-level ``if``/``try``,
are not indexed. A second definition under the same qualified name (a property's setter)
is indexed as ``Name[2]``.

Both memories of a pair carry the tag ``code:<24 hex>``, the first 96 bits of
``sha256(path "::" qualname)``: a re-index finds the pair by it. A re-index writes only
what changed, judged by the content hash of the symbol's source: a new symbol gets a new
pair, a changed one a new version of each of its memories whose content changed (a comment
changes the code, not the prose), a symbol gone from a file that was read
(or whose file is gone from an indexed directory) has both tombstoned, and an unchanged one
is not written (so a run over unchanged code journals nothing). A symbol that moved without
changing keeps the line range it had when its code last changed. A run is one batch: all of
it or nothing.

Files that cannot be indexed are reported and skipped, and their memories are left as they
were: a syntax error, text that is not UTF-8, and any file that is not ``.py`` (named
explicitly; a directory walk only looks at ``*.py``, skipping hidden directories and
``__pycache__``).
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ...core.predicates import Q
from ...core.taxonomy import MAX_SHORT_TEXT, ArtifactRef, Fact
from ...errors import ValidationError

if TYPE_CHECKING:
    from ...core.state import Record
    from ...cortex import Cortex

__all__ = ["INDEX_TAG", "IndexReport", "Symbol", "index_code", "read_symbols"]

INDEX_TAG = "code-index"
"""The tag on every memory the indexer writes (and the only ones it changes)."""
DESCRIPTION_TAG = "code_description"
CODE_TAG = "code"
MEDIA_TYPE = "text/x-python"
MAX_CALLS = 40
"""The most called names listed in a description (the rest are counted)."""
_FIND_LIMIT = 10_000_000

_FunctionDef = ast.FunctionDef | ast.AsyncFunctionDef


@attrs.frozen
class Symbol:
    """One public function, method or class of a Python file.

    Attributes:
        path: the file, relative to the indexed base, with ``/`` separators.
        qualname: ``Class.method`` style dotted name (``[2]`` suffixed when repeated).
        kind: ``"function"``, ``"method"`` or ``"class"``.
        start: first line (its first decorator's, if any), 1-based.
        end: last line, inclusive.
        source: the lines ``start..end`` exactly as in the file (a class's public members
            replaced by a comment line each).
        description: the prose stored in the ``code_description`` memory.
    """

    path: str
    qualname: str
    kind: str
    start: int
    end: int
    source: str
    description: str

    @property
    def key(self) -> str:
        """The tag both memories of this symbol's pair carry."""
        digest = hashlib.sha256(f"{self.path}::{self.qualname}".encode()).hexdigest()
        return f"code:{digest[:24]}"

    @property
    def content_hash(self) -> str:
        return "sha256:" + hashlib.sha256(self.source.encode("utf-8", "surrogatepass")).hexdigest()

    def artifact(self) -> ArtifactRef:
        """The memory holding the code."""
        return ArtifactRef(
            text=f"{self.kind} {self.qualname} in {self.path}, lines {self.start}-{self.end}",
            path=self.path,
            media_type=MEDIA_TYPE,
            content=self.source,
            content_hash=self.content_hash,
            tags=[CODE_TAG, INDEX_TAG, self.key],
        )

    def fact(self) -> Fact:
        """The ``code_description`` memory."""
        return Fact(
            text=self.description,
            summary=f"{self.qualname} ({self.path})"[:MAX_SHORT_TEXT],
            tags=[DESCRIPTION_TAG, INDEX_TAG, self.key],
        )


@attrs.frozen
class IndexReport:
    """What one :func:`index_code` run did.

    Attributes:
        files: the Python files read.
        symbols: the public symbols found in them.
        written: symbols indexed for the first time (``path::qualname``).
        updated: symbols whose code changed (new versions of both memories).
        unchanged: how many symbols were already indexed as they are.
        tombstoned: symbols that are gone (both memories tombstoned).
        skipped: ``(path, reason)`` of each file that was not indexed.
        seq: the store's journal seq after the run.
    """

    files: int
    symbols: int
    written: tuple[str, ...]
    updated: tuple[str, ...]
    unchanged: int
    tombstoned: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]
    seq: int

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "symbols": self.symbols,
            "written": list(self.written),
            "updated": list(self.updated),
            "unchanged": self.unchanged,
            "tombstoned": list(self.tombstoned),
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "seq": self.seq,
        }


# ---------------------------------------------------------------------------
# Reading


def read_symbols(source: str, path: str) -> list[Symbol]:
    """The public symbols of one Python file's text, in file order.

    Args:
        source: the file's text.
        path: the file's path as it is to be recorded.

    Raises:
        ValidationError: field ``path``, the text does not parse (line and message named).
    """
    try:
        module = ast.parse(source, filename=path)
    except (SyntaxError, ValueError) as error:
        raise ValidationError(f"{path}: {_syntax_reason(error)}", field="path") from None
    return _symbols(module, source, path)


def _syntax_reason(error: SyntaxError | ValueError) -> str:
    line = getattr(error, "lineno", None)
    where = f" at line {line}" if line else ""
    return f"syntax error{where}: {getattr(error, 'msg', None) or error}"


def _symbols(module: ast.Module, source: str, path: str) -> list[Symbol]:
    lines = source.splitlines(keepends=True)
    seen: dict[str, int] = {}
    found: list[Symbol] = []
    for node, qualname, kind in _public(module.body, ""):
        count = seen.get(qualname, 0) + 1
        seen[qualname] = count
        if count > 1:
            qualname = f"{qualname}[{count}]"
        start, end = _span(node)
        text = _code(node, lines) if isinstance(node, ast.ClassDef) else _lines(lines, start, end)
        found.append(Symbol(path, qualname, kind, start, end, text, _describe(node, kind)))
    return found


def _span(node: _FunctionDef | ast.ClassDef) -> tuple[int, int]:
    """A definition's first line (its first decorator's) and last line, 1-based."""
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return start, node.end_lineno or node.lineno


def _lines(lines: list[str], start: int, end: int) -> str:
    return "".join(lines[start - 1 : end])


def _code(node: ast.ClassDef, lines: list[str]) -> str:
    """A class's source with each public member (indexed as its own symbol) replaced by one
    comment line naming it: a change to a method then changes the method alone."""
    start, end = _span(node)
    parts = []
    for member, _, _ in _public(node.body, "", recurse=False):
        first, last = _span(member)
        parts.append(_lines(lines, start, first - 1))
        parts.append(f"{' ' * member.col_offset}# {member.name}: indexed on its own\n")
        start = last + 1
    parts.append(_lines(lines, start, end))
    return "".join(parts)


def _public(
    body: Iterable[ast.stmt], prefix: str, *, recurse: bool = True
) -> Iterator[tuple[_FunctionDef | ast.ClassDef, str, str]]:
    for node in body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if node.name.startswith("_"):
            continue
        qualname = prefix + node.name
        if isinstance(node, ast.ClassDef):
            yield node, qualname, "class"
            if recurse:
                yield from _public(node.body, qualname + ".")
        else:
            yield node, qualname, "method" if prefix else "function"


def _describe(node: _FunctionDef | ast.ClassDef, kind: str) -> str:
    """The prose of a symbol: signature, the docstring's first paragraph, what it calls."""
    if isinstance(node, ast.ClassDef):
        bases = ", ".join(ast.unparse(b) for b in (*node.bases, *node.keywords))
        signature = f"class {node.name}({bases})" if bases else f"class {node.name}"
    else:
        prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
        returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
        signature = f"{prefix} {node.name}({ast.unparse(node.args)}){returns}"
    parts = [f"{kind.capitalize()} `{signature}`."]
    doc = ast.get_docstring(node)
    if doc:
        parts.append(" ".join(doc.split("\n\n", 1)[0].split()))
    if isinstance(node, ast.ClassDef):
        methods = [
            n.name
            for n in node.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not n.name.startswith("_")
        ]
        if methods:
            parts.append("Methods: " + ", ".join(methods) + ".")
    else:
        calls = _calls(node)
        if calls:
            shown = ", ".join(calls[:MAX_CALLS])
            more = f" and {len(calls) - MAX_CALLS} more" if len(calls) > MAX_CALLS else ""
            parts.append(f"Calls: {shown}{more}.")
    return " ".join(parts)


def _calls(node: ast.AST) -> list[str]:
    """The names called in ``node`` (``f(...)`` -> ``f``, ``a.b.f(...)`` -> ``f``), sorted."""
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func = sub.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute):
                names.add(func.attr)
    return sorted(names)


def _walk(target: Path) -> list[Path]:
    """The ``*.py`` files under a directory, sorted; hidden and cache directories skipped."""
    found = []
    for path in target.rglob("*.py"):
        relative = path.relative_to(target).parts
        if any(part.startswith(".") or part == "__pycache__" for part in relative[:-1]):
            continue
        if path.is_file():
            found.append(path)
    return sorted(found)


def _relative(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base).as_posix()
    except ValueError:
        raise ValidationError(f"{path} is outside the indexed base {base}", field="paths") from None


# ---------------------------------------------------------------------------
# Indexing


def index_code(
    cx: Cortex,
    paths: Sequence[str | Path],
    *,
    base: str | Path,
    ns: str = "default",
    at: int | None = None,
) -> IndexReport:
    """Index the Python files at ``paths`` (files or directories) into ``cx``.

    Args:
        cx: an open, writable store.
        paths: files and directories to index; each must lie under ``base``.
        base: the directory paths are recorded relative to (the project's root), so that
            indexing a directory or one file in it gives the same symbols.
        ns: the namespace of the memories.
        at: the time of the writes (ms; default: the store's clock).

    Returns:
        An :class:`IndexReport`.

    Raises:
        ValidationError: no paths, a path that does not exist or lies outside ``base``.
    """
    root = Path(base).resolve()
    if not root.is_dir():
        raise ValidationError(f"the base {base} is not a directory", field="base")
    if not paths:
        raise ValidationError("name at least one file or directory to index", field="paths")
    files: dict[str, Path] = {}
    # where a symbol that is no longer found has been removed: the named files, and every
    # file under a named directory (a file gone from it takes its symbols with it)
    named: set[str] = set()
    directories: list[str] = []
    skipped: list[tuple[str, str]] = []
    for given in paths:
        target = Path(given)
        if not target.exists():
            raise ValidationError(f"{given} does not exist", field="paths")
        relative = _relative(target, root)
        if target.is_dir():
            directories.append("" if relative == "." else relative + "/")
            for path in _walk(target):
                files.setdefault(_relative(path, root), path)
        elif target.suffix == ".py":
            named.add(relative)
            files.setdefault(relative, target)
        else:
            skipped.append((relative, "not a Python file: only .py files are indexed"))
    fresh: dict[str, Symbol] = {}
    read: set[str] = set()
    for relative in sorted(files):
        try:
            text = files[relative].read_bytes().decode("utf-8")
            symbols = _symbols(ast.parse(text, filename=relative), text, relative)
        except UnicodeDecodeError as error:
            skipped.append((relative, f"not UTF-8 text ({error.reason} at byte {error.start})"))
            continue
        except (SyntaxError, ValueError) as error:  # ValueError: a NUL byte in the source
            skipped.append((relative, _syntax_reason(error)))
            continue
        read.add(relative)
        for symbol in symbols:
            fresh[symbol.key] = symbol
    unreadable = {path for path, _ in skipped}
    pairs = _indexed(cx, ns)

    def in_scope(path: str) -> bool:
        if path in unreadable:
            return False
        return path in named or any(path.startswith(d) for d in directories)

    written: list[str] = []
    updated: list[str] = []
    tombstoned: list[str] = []
    unchanged = 0
    with cx.batch() as batch:
        for key in sorted(pairs):
            artifact, fact = pairs[key]
            if key in fresh or artifact is None:
                continue
            stored = artifact.memory
            if not isinstance(stored, ArtifactRef) or not in_scope(stored.path or ""):
                continue
            for record in (artifact, fact):
                if record is not None:
                    batch.tombstone(record.uri, reason=f"gone from {stored.path}", at=at)
            tombstoned.append(stored.text)
        for key, symbol in fresh.items():
            name = f"{symbol.path}::{symbol.qualname}"
            artifact, fact = pairs.get(key, (None, None))
            if artifact is not None and fact is not None:
                stored = artifact.memory
                if isinstance(stored, ArtifactRef) and stored.content_hash == symbol.content_hash:
                    unchanged += 1
                    continue
                code = symbol.artifact()
                batch.update(
                    artifact.uri,
                    text=code.text,
                    content=code.content,
                    content_hash=code.content_hash,
                    at=at,
                )
                batch.update(fact.uri, text=symbol.description, at=at)
                updated.append(name)
                continue
            for record in (artifact, fact):  # half a pair (the other was removed): start over
                if record is not None:
                    batch.tombstone(record.uri, reason="its pair is gone", at=at)
            code_uri = batch.write(symbol.artifact(), ns=ns, at=at)
            fact_uri = batch.write(symbol.fact(), ns=ns, at=at)
            batch.add_edge(code_uri, fact_uri, "source_of", at=at)
            written.append(name)
    return IndexReport(
        files=len(read),
        symbols=len(fresh),
        written=tuple(written),
        updated=tuple(updated),
        unchanged=unchanged,
        tombstoned=tuple(tombstoned),
        skipped=tuple(sorted(skipped)),
        seq=cx.seq,
    )


def _indexed(cx: Cortex, ns: str) -> dict[str, tuple[Record | None, Record | None]]:
    """The indexed memories of ``ns`` that are not tombstoned or pruned, by key:
    ``{key: (artifact, fact)}``.

    Archived and merged ones count: the lifecycle may archive a description, or merge two
    alike ones (two ``now_ms`` methods), and the symbol is still indexed then; a re-index
    that took it for new would write its pair again on every run.
    """
    pairs: dict[str, tuple[Record | None, Record | None]] = {}
    kept = Q.status("active") | Q.status("archived") | Q.status("merged")
    hits = cx.find(Q.tag(INDEX_TAG) & Q.ns(ns) & kept, limit=_FIND_LIMIT, order_by="recent")
    # A merge's survivor carries the key tags of both memories; each key takes the
    # memory with the fewest keys (its own, where the merged one kept it).
    best: dict[tuple[str, str], tuple[int, Record]] = {}
    for hit in hits.hits:
        memory = hit.record.memory
        if not isinstance(memory, (ArtifactRef, Fact)):
            continue
        keys = [t for t in memory.tags if t.startswith("code:")]
        for key in keys:
            slot = (key, memory.type_name)
            if slot not in best or len(keys) < best[slot][0]:
                best[slot] = (len(keys), hit.record)
    for (key, type_name), (_, record) in sorted(best.items()):
        artifact, fact = pairs.get(key, (None, None))
        if type_name == ArtifactRef.type_name:
            artifact = record
        else:
            fact = record
        pairs[key] = (artifact, fact)
    return pairs
