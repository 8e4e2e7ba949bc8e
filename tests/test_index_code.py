"""Prose-code pairing: ``index_code`` and ``cortexgraph index-code`` over this repository's
own ``src/`` (copied, so that it can be edited), checked against an independent ``ast``
walk."""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph.batch import Batch
from cortexgraph.cli import main
from cortexgraph.core.fusion import embed_text
from cortexgraph.core.postings import index_text
from cortexgraph.integrations.claude_code.indexing import INDEX_TAG, IndexReport, index_code

SRC = Path(__file__).resolve().parents[1] / "src"
CLOCK_PY = "src/cortexgraph/clock.py"


def _public(body: list[ast.stmt], prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    """The rule the docs state, walked here on its own: module-level functions and classes
    not starting with ``_``, and the same inside such classes."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name.startswith("_"):
                continue
            yield prefix + node.name, node
            if isinstance(node, ast.ClassDef):
                yield from _public(node.body, prefix + node.name + ".")


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> int:
    return min([node.lineno] + [d.lineno for d in node.decorator_list])


def _own_lines(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[int]:
    """The line numbers of a definition, less those of a class's public members after
    their first line."""
    assert node.end_lineno is not None
    numbers = set(range(_first_line(node), node.end_lineno + 1))
    if isinstance(node, ast.ClassDef):
        for name, member in _public(node.body):
            if "." not in name:
                assert isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                assert member.end_lineno is not None
                numbers -= set(range(_first_line(member) + 1, member.end_lineno + 1))
    return sorted(numbers)


def _expected(base: Path) -> dict[tuple[str, str], str]:
    """``{(path, qualname): sha256 of its source}`` for every public symbol under src/."""
    found: dict[tuple[str, str], str] = {}
    for path in sorted((base / "src").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        relative = path.relative_to(base).as_posix()
        seen: dict[str, int] = {}
        for qualname, node in _public(ast.parse(text).body):
            assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            seen[qualname] = seen.get(qualname, 0) + 1
            name = qualname if seen[qualname] == 1 else f"{qualname}[{seen[qualname]}]"
            source = "".join(lines[n - 1] for n in _own_lines(node))
            if isinstance(node, ast.ClassDef):  # its members are replaced by a line each
                for member_name, member in _public(node.body):
                    if "." not in member_name:
                        assert isinstance(
                            member, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
                        )
                        indent = " " * member.col_offset
                        first = lines[_first_line(member) - 1]
                        source = source.replace(
                            first, f"{indent}# {member_name}: indexed on its own\n", 1
                        )
            found[(relative, name)] = hashlib.sha256(source.encode()).hexdigest()
    return found


def _pairs(cx: cg.Cortex) -> dict[str, tuple[cg.Record, cg.Record]]:
    """The active indexed pairs by key tag: ``{key: (artifact, fact)}``."""
    found: dict[str, dict[str, cg.Record]] = {}
    for hit in cx.find(cg.Q.tag(INDEX_TAG), limit=100_000).hits:
        key = next(t for t in hit.record.memory.tags if t.startswith("code:"))
        found.setdefault(key, {})[hit.record.memory.type_name] = hit.record
    return {key: (kinds["artifact_ref"], kinds["fact"]) for key, kinds in found.items()}


def _ops(cx: cg.Cortex, since: int) -> list[tuple[str, bytes]]:
    return [(entry.op, entry.memory_id) for entry in cx.journal(since)]


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of this repository's src/ under ``tmp_path/project``."""
    base = tmp_path / "project"
    shutil.copytree(SRC, base / "src", ignore=shutil.ignore_patterns("__pycache__"))
    return base


@pytest.fixture
def indexed(cx: cg.Cortex, copy: Path) -> IndexReport:
    """src/ indexed once into the fresh store."""
    return index_code(cx, [copy / "src"], base=copy)


def test_every_public_symbol_of_src_has_its_pair(
    cx: cg.Cortex, copy: Path, indexed: IndexReport
) -> None:
    """Every public function, method and class under src/, found by an independent ast
    walk, has exactly one ArtifactRef holding its exact source (hash checked) and one
    code_description Fact, linked ArtifactRef --source_of--> Fact; the code is not in
    what is embedded."""
    expected = _expected(copy)
    pairs = _pairs(cx)
    assert indexed.symbols == len(expected) == len(pairs) == len(indexed.written)
    assert indexed.skipped == ()
    got = {}
    for artifact, fact in pairs.values():
        code, description = artifact.memory, fact.memory
        assert isinstance(code, cg.ArtifactRef) and isinstance(description, cg.Fact)
        assert "code_description" in description.tags
        assert code.content is not None and code.path is not None
        digest = hashlib.sha256(code.content.encode()).hexdigest()
        assert code.content_hash == f"sha256:{digest}"
        assert code.content not in embed_text(code, "default")
        assert code.content not in index_text(code)
        qualname = code.text.split(" ")[1]
        assert description.summary == f"{qualname} ({code.path})"
        got[(code.path, qualname)] = digest
        edges = cx.edges(artifact.uri, direction="out")
        assert [(e.relation, e.dst.id) for e in edges] == [("source_of", fact.uri.id)]
    assert got == expected


def test_description_holds_signature_docstring_and_calls(
    cx: cg.Cortex, indexed: IndexReport
) -> None:
    """A function's description has its signature, its docstring's first paragraph and
    the names it calls; a class's lists its public methods."""
    texts = {f.memory.summary: f.memory.text for _, f in _pairs(cx).values()}
    advance = texts[f"ManualClock.advance ({CLOCK_PY})"]
    assert advance.startswith("Method `def advance(self, ms: int) -> None`.")
    assert "Calls: ValidationError, _check_ms, type." in advance
    assert texts[f"ManualClock ({CLOCK_PY})"] == (
        "Class `class ManualClock`. A clock that moves only when told to: for tests, replays"
        " and simulations. Methods: now_ms, set, advance."
    )


def test_second_identical_run_writes_nothing(
    cx: cg.Cortex, copy: Path, indexed: IndexReport
) -> None:
    """Re-indexing unchanged code journals nothing: the seq stays where it was."""
    seq = cx.seq
    again = index_code(cx, [copy / "src"], base=copy)
    assert cx.seq == seq == again.seq
    assert again.written == again.updated == again.tombstoned == ()
    assert again.unchanged == indexed.symbols


def test_editing_one_function_updates_exactly_its_pair(
    cx: cg.Cortex, copy: Path, indexed: IndexReport
) -> None:
    """Editing one method (which also moves every symbol below it) writes new versions of
    that method's two memories and nothing else."""
    path = copy / CLOCK_PY
    text = path.read_text(encoding="utf-8")
    marker = '        """Move forward by ``ms`` (which must not be negative)."""\n'
    assert marker in text
    edited = marker + "        audit(ms)  # an edit made by the test\n"
    path.write_text(text.replace(marker, edited), encoding="utf-8")
    before = _pairs(cx)
    seq = cx.seq
    report = index_code(cx, [copy / "src"], base=copy)
    assert report.updated == (f"{CLOCK_PY}::ManualClock.advance",)
    assert report.written == report.tombstoned == ()
    key = next(
        k for k, (a, _) in before.items() if a.memory.text.startswith("method ManualClock.advance ")
    )
    artifact, fact = before[key]
    assert sorted(_ops(cx, seq)) == sorted([("update", artifact.uri.id), ("update", fact.uri.id)])
    new_code = cx.resolve(artifact.uri.at_version(2)).memory
    assert isinstance(new_code, cg.ArtifactRef) and new_code.content is not None
    assert "an edit made by the test" in new_code.content
    assert (
        "Calls: ValidationError, _check_ms, audit, type."
        in cx.resolve(fact.uri.at_version(2)).memory.text
    )


def test_comment_only_edit_updates_the_code_not_the_description(
    cx: cg.Cortex, copy: Path, indexed: IndexReport
) -> None:
    """A change that leaves the prose as it was (a comment) writes a new version of the
    code alone: the description is not rewritten with the same text."""
    path = copy / CLOCK_PY
    marker = "    def advance(self, ms: int) -> None:\n"
    path.write_text(path.read_text(encoding="utf-8").replace(marker, marker + "        # why\n"))
    before = {a.memory.text.split(" ")[1]: (a, f) for a, f in _pairs(cx).values()}
    artifact, _ = before["ManualClock.advance"]
    seq = cx.seq
    report = index_code(cx, [copy / "src"], base=copy)
    assert report.updated == (f"{CLOCK_PY}::ManualClock.advance",)
    assert _ops(cx, seq) == [("update", artifact.uri.id)]


def test_removed_method_is_tombstoned(cx: cg.Cortex, copy: Path, indexed: IndexReport) -> None:
    """Deleting a method tombstones its two memories; its class, whose code and method
    list lose it, gets new versions of its two; nothing else is written."""
    path = copy / CLOCK_PY
    module = ast.parse(path.read_text(encoding="utf-8"))
    node = next(n for q, n in _public(module.body) if q == "ManualClock.advance")
    assert isinstance(node, ast.FunctionDef) and node.end_lineno is not None
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    del lines[node.lineno - 1 : node.end_lineno]
    path.write_text("".join(lines), encoding="utf-8")
    before = _pairs(cx)
    seq = cx.seq
    report = index_code(cx, [copy / "src"], base=copy)
    assert len(report.tombstoned) == 1 and "ManualClock.advance" in report.tombstoned[0]
    assert report.updated == (f"{CLOCK_PY}::ManualClock",) and report.written == ()
    gone = {k for k in before if k not in _pairs(cx)}
    assert len(gone) == 1
    artifact, fact = before[gone.pop()]
    cls_artifact, cls_fact = next(
        pair for pair in before.values() if pair[1].memory.summary == f"ManualClock ({CLOCK_PY})"
    )
    assert sorted(_ops(cx, seq)) == sorted(
        [
            ("tombstone", artifact.uri.id),
            ("tombstone", fact.uri.id),
            ("update", cls_artifact.uri.id),
            ("update", cls_fact.uri.id),
        ]
    )
    assert cx.resolve(artifact.uri).status == "tombstoned"
    assert "advance" not in cx.resolve(cls_fact.uri.at_version(2)).memory.text


def test_deleted_file_under_an_indexed_directory_is_tombstoned(
    cx: cg.Cortex, copy: Path, indexed: IndexReport
) -> None:
    """A file removed from an indexed directory takes its symbols' memories with it;
    indexing one file alone leaves the other files' memories alone."""
    (copy / CLOCK_PY).unlink()
    alone = index_code(cx, [copy / "src/cortexgraph/errors.py"], base=copy)
    assert alone.tombstoned == () and alone.written == ()
    report = index_code(cx, [copy / "src"], base=copy)
    assert len(report.tombstoned) == 8
    assert all(CLOCK_PY in name for name in report.tombstoned)


def test_descriptions_merged_by_the_lifecycle_are_not_indexed_again(tmp_path: Path) -> None:
    """With auto-linking, compaction merges two alike descriptions (two ``now_ms``
    methods); a re-index still knows the merged one and writes nothing."""
    clock = cg.ManualClock(1_700_000_000_000)
    with cg.open(
        tmp_path / "s", "agent", clock=clock, autolink=True, embedder=cg.HashEmbedder()
    ) as cx:
        index_code(cx, [SRC / "cortexgraph/clock.py"], base=SRC.parent)
        assert cx.compact().merged
        seq = cx.seq
        again = index_code(cx, [SRC / "cortexgraph/clock.py"], base=SRC.parent)
        assert again.written == () and cx.seq == seq


def test_syntax_error_is_reported_and_the_file_left_as_it_was(
    cx: cg.Cortex, tmp_path: Path
) -> None:
    """A file that does not parse is skipped with its line named; the others are
    indexed, and the broken file's earlier memories are neither changed nor removed."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "a.py").write_text("def alpha():\n    return beta()\n", encoding="utf-8")
    (project / "b.py").write_text("def gamma():\n    pass\n", encoding="utf-8")
    first = index_code(cx, [project], base=project)
    assert first.symbols == 2
    (project / "b.py").write_text("def gamma(:\n    pass\n", encoding="utf-8")
    seq = cx.seq
    report = index_code(cx, [project], base=project)
    assert [path for path, _ in report.skipped] == ["b.py"]
    assert "syntax error at line 1" in report.skipped[0][1]
    assert cx.seq == seq and report.tombstoned == ()
    assert len(_pairs(cx)) == 2


def test_broken_file_in_a_fresh_store_writes_nothing_of_it(cx: cg.Cortex, tmp_path: Path) -> None:
    """Only the readable files are indexed; a non-UTF-8 file, a file with a syntax error
    and a named file that is not Python are each reported with a reason."""
    (tmp_path / "ok.py").write_text("class Kept:\n    pass\n", encoding="utf-8")
    (tmp_path / "bad.py").write_text("x = (\n", encoding="utf-8")
    (tmp_path / "latin.py").write_bytes(b"# caf\xe9\ndef f():\n    pass\n")
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    report = index_code(cx, [tmp_path, tmp_path / "notes.txt"], base=tmp_path)
    reasons = dict(report.skipped)
    assert set(reasons) == {"bad.py", "latin.py", "notes.txt"}
    assert "syntax error" in reasons["bad.py"] and "not UTF-8" in reasons["latin.py"]
    assert "not a Python file" in reasons["notes.txt"]
    assert report.written == ("ok.py::Kept",)
    assert [a.memory.path for a, _ in _pairs(cx).values()] == ["ok.py"]


def test_a_failure_mid_run_writes_nothing(
    cx: cg.Cortex, copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run is one batch: if it fails after some writes, none of them is visible."""
    calls = 0
    real = Batch.add_edge

    def failing(self: Batch, *args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 50:
            raise cg.StorageError("simulated failure")
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Batch, "add_edge", failing)
    with pytest.raises(cg.StorageError):
        index_code(cx, [copy / "src"], base=copy)
    assert cx.seq == 0


def test_bad_paths_are_validation_errors(cx: cg.Cortex, tmp_path: Path) -> None:
    """A missing path, a path outside the base and an empty list each raise a
    ValidationError naming the problem, with nothing written."""
    inside = tmp_path / "in"
    inside.mkdir()
    with pytest.raises(cg.ValidationError, match="does not exist"):
        index_code(cx, [inside / "nope.py"], base=inside)
    with pytest.raises(cg.ValidationError, match="outside the indexed base"):
        index_code(cx, [tmp_path], base=inside)
    with pytest.raises(cg.ValidationError, match="at least one"):
        index_code(cx, [], base=inside)
    assert cx.seq == 0


def test_cli_indexes_then_reruns_idempotently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cortexgraph index-code`` writes each symbol's pair, then nothing on a rerun; a
    path outside --base exits 1 with the ValidationError."""
    (tmp_path / "mod.py").write_text(
        'def one(x):\n    """First.\n\n    More."""\n    return two(x)\n\n\ndef two(x):\n'
        "    return x\n",
        encoding="utf-8",
    )
    args = ["index-code", str(tmp_path / "mod.py"), "--base", str(tmp_path),
            "--root", str(tmp_path / "s"), "--json"]  # fmt: skip
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["written"] == ["mod.py::one", "mod.py::two"]
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["written"] == [] and second["unchanged"] == 2 and second["seq"] == first["seq"]
    outside = [
        "index-code",
        str(tmp_path),
        "--base",
        str(tmp_path / "s"),
        "--root",
        str(tmp_path / "s"),
    ]
    assert main(outside) == 1
    assert "outside the indexed base" in capsys.readouterr().err
