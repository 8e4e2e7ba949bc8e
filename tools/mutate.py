"""A small mutation run: does the test suite notice when the code is wrong?

For each module named in :data:`TARGETS`, the script finds every place where a typical bug
could be planted, draws a fixed sample of them (seeded by the module's name, so a rerun
plants the same mutants), and for each one writes the mutated module into a scratch copy of
the repository, runs the tests that cover that module, and records whether they failed
(*killed*), passed (*survived*) or ran past the time limit (*timeout*, counted as killed: a
bug that hangs the suite is noticed).

The mutations, one at a time:

- ``compare``: flip a comparison (``<`` and ``<=``, ``>`` and ``>=``, ``==`` and ``!=``,
  ``in`` and ``not in``, ``is`` and ``is not``);
- ``bool``: ``and`` and ``or`` swapped; ``not x`` becomes ``x``;
- ``arith``: ``+`` and ``-`` swapped, ``*`` becomes ``//``;
- ``const``: an integer constant off by one (``n`` becomes ``n + 1``);
- ``guard``: a statement ``if ...: raise ...`` removed (a dropped check);
- ``swap``: the first two positional arguments of a call swapped;
- ``return``: ``return x`` becomes ``return None`` (where ``x`` is not ``None`` already).

Usage::

    .venv/bin/python tools/mutate.py                 # every target, default sample
    .venv/bin/python tools/mutate.py --per-module 20 --json out.json
    .venv/bin/python tools/mutate.py --module core/keys.py --show

Nothing here is part of the test suite; ``docs/testing.md`` reports a run.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path("src/cortexgraph")

#: module (under src/cortexgraph) -> the test files that cover it
TARGETS: dict[str, list[str]] = {
    "core/codec.py": ["tests/test_roundtrip.py"],
    "core/keys.py": ["tests/test_roundtrip.py", "tests/test_cortex.py", "tests/test_batch.py"],
    "core/uri.py": ["tests/test_uri.py"],
    "core/hashing.py": ["tests/test_merkle.py"],
    "core/roots.py": ["tests/test_merkle.py", "tests/test_merkle_smt.py"],
    "core/smt_store.py": ["tests/test_smt_store.py"],
    "core/smt_apply.py": ["tests/test_smt_store.py", "tests/test_commitments.py"],
    "core/commitments.py": ["tests/test_commitments.py", "tests/test_replay.py"],
    "core/journal.py": [
        "tests/test_replay.py",
        "tests/test_cortex.py",
        "tests/test_batch.py",
        "tests/test_state_machine.py",
    ],
    "core/state.py": ["tests/test_roundtrip.py", "tests/test_cortex.py"],
    "core/taxonomy.py": ["tests/test_body_fast.py", "tests/test_bad_inputs.py"],
    "core/body.py": ["tests/test_body_fast.py", "tests/test_roundtrip.py"],
    "core/predicates.py": ["tests/test_query.py", "tests/test_find.py"],
    "core/query.py": ["tests/test_query.py", "tests/test_find.py"],
    "core/forms.py": ["tests/test_forms.py"],
    "core/text.py": ["tests/test_text.py", "tests/test_recall.py"],
    "core/postings.py": ["tests/test_recall.py", "tests/test_text.py"],
    "core/fusion.py": ["tests/test_recall.py"],
    "core/salience.py": ["tests/test_salience.py", "tests/test_attest.py"],
    "core/signals.py": ["tests/test_salience.py", "tests/test_find.py", "tests/test_graph.py"],
    "core/graph.py": ["tests/test_graph.py"],
    "core/lifecycle.py": ["tests/test_lifecycle_rules.py", "tests/test_compact.py"],
    "core/packing.py": ["tests/test_context.py", "tests/test_context_bundle.py"],
    "core/bundle.py": ["tests/test_scope.py"],
    "find.py": ["tests/test_find.py", "tests/test_walk.py"],
    "recall.py": ["tests/test_recall.py", "tests/test_embedding_reuse.py"],
    "context.py": ["tests/test_context.py", "tests/test_context_bundle.py"],
    "compact.py": ["tests/test_compact.py"],
    "scope.py": ["tests/test_scope.py"],
    "replay.py": ["tests/test_replay.py"],
    "cortex.py": ["tests/test_cortex.py", "tests/test_batch.py", "tests/test_bad_inputs.py"],
}

_COMPARE_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


@dataclass(frozen=True)
class Site:
    """One place a mutation can be planted: the ``index``-th node of ``kind``."""

    kind: str
    index: int
    line: int
    function: str


@dataclass
class Result:
    module: str
    site: Site
    outcome: str  # killed | survived | timeout
    seconds: float
    detail: str


def _skip_annotations(tree: ast.AST) -> set[int]:
    """ids of nodes inside annotations and f-strings: mutating them changes nothing."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        parts: list[ast.AST | None] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parts.append(node.returns)
            parts.extend(a.annotation for a in node.args.args + node.args.kwonlyargs)
        elif isinstance(node, ast.AnnAssign):
            parts.append(node.annotation)
        elif isinstance(node, ast.JoinedStr):
            parts.append(node)
        for part in parts:
            if part is not None:
                skipped.update(id(n) for n in ast.walk(part))
    return skipped


def _is_raise_guard(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.If)
        and not node.orelse
        and len(node.body) == 1
        and isinstance(node.body[0], ast.Raise)
    )


def _candidates(node: ast.AST) -> Iterator[str]:
    """The mutation kinds that apply to ``node``."""
    if isinstance(node, ast.Compare) and type(node.ops[0]) in _COMPARE_FLIP:
        yield "compare"
    elif isinstance(node, ast.BoolOp) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
    ):
        yield "bool"
    elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        yield "arith"
    elif (
        isinstance(node, ast.Constant)
        and type(node.value) is int
        and not isinstance(node.value, bool)
    ):
        yield "const"
    elif _is_raise_guard(node):
        yield "guard"
    elif isinstance(node, ast.Call) and len(node.args) >= 2 and not any(
        isinstance(a, ast.Starred) for a in node.args[:2]
    ):
        yield "swap"
    elif isinstance(node, ast.Return) and not (
        node.value is None
        or (isinstance(node.value, ast.Constant) and node.value.value is None)
    ):
        yield "return"  # (``return None`` would stay as it is)


def _walk_with_function(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """Every node, in a fixed order, with the name of the function holding it."""

    def visit(node: ast.AST, function: str) -> Iterator[tuple[ast.AST, str]]:
        yield node, function
        inner = node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
        for child in ast.iter_child_nodes(node):
            yield from visit(child, inner)

    yield from visit(tree, "<module>")


def sites(source: str) -> list[Site]:
    """Every mutation site of a module, in source order (docstrings and module-level
    constants such as ``__all__`` are left alone: only code inside functions is mutated)."""
    tree = ast.parse(source)
    skipped = _skip_annotations(tree)
    counts: dict[str, int] = {}
    found = []
    for node, function in _walk_with_function(tree):
        if id(node) in skipped:
            continue
        for kind in _candidates(node):
            index = counts.get(kind, 0)
            counts[kind] = index + 1
            if function != "<module>":
                found.append(Site(kind, index, getattr(node, "lineno", 0), function))
    return found


def mutate(source: str, site: Site) -> str:
    """``source`` with the mutation of ``site`` applied."""
    tree = ast.parse(source)
    skipped = _skip_annotations(tree)
    seen = 0
    target: ast.AST | None = None
    parent_of: dict[int, tuple[ast.AST, str, int | None]] = {}
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, ast.AST):
                        parent_of[id(item)] = (parent, field, i)
            elif isinstance(value, ast.AST):
                parent_of[id(value)] = (parent, field, None)
    for node, _ in _walk_with_function(tree):
        if id(node) in skipped or site.kind not in _candidates(node):
            continue
        if seen == site.index:
            target = node
            break
        seen += 1
    if target is None:
        raise LookupError(f"no site {site}")
    _apply(target, site.kind, parent_of)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _apply(node: ast.AST, kind: str, parent_of: dict[int, tuple[ast.AST, str, int | None]]) -> None:
    if kind == "compare":
        assert isinstance(node, ast.Compare)
        node.ops[0] = _COMPARE_FLIP[type(node.ops[0])]()
    elif kind == "bool":
        if isinstance(node, ast.BoolOp):
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        else:
            assert isinstance(node, ast.UnaryOp)
            _replace(node, node.operand, parent_of)
    elif kind == "arith":
        assert isinstance(node, ast.BinOp)
        node.op = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv}[type(node.op)]()
    elif kind == "const":
        assert isinstance(node, ast.Constant) and type(node.value) is int
        node.value = node.value + 1
    elif kind == "guard":
        _replace(node, ast.Pass(), parent_of)
    elif kind == "swap":
        assert isinstance(node, ast.Call)
        node.args[0], node.args[1] = node.args[1], node.args[0]
    elif kind == "return":
        assert isinstance(node, ast.Return)
        node.value = ast.Constant(None)


def _replace(
    node: ast.AST, new: ast.AST, parent_of: dict[int, tuple[ast.AST, str, int | None]]
) -> None:
    parent, field, index = parent_of[id(node)]
    if index is None:
        setattr(parent, field, new)
    else:
        getattr(parent, field)[index] = new


def _run_tests(work: Path, tests: list[str], limit: float) -> tuple[str, float, str]:
    env = dict(os.environ, PYTHONPATH=str(work / "src"), CORTEXGRAPH_INVARIANTS="1")
    env.pop("CORTEXGRAPH_REGEN_GOLDEN", None)
    command = [
        sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
        "-o", "addopts=--strict-markers", *tests,
    ]  # fmt: skip
    started = time.perf_counter()
    try:
        run = subprocess.run(
            command, cwd=work, env=env, capture_output=True, text=True, timeout=limit
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - started, f"over {limit:.0f} s"
    seconds = time.perf_counter() - started
    if run.returncode == 0:
        return "survived", seconds, ""
    failed = [line for line in run.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    return "killed", seconds, (failed[0] if failed else run.stdout.strip()[-200:])[:200]


def run(
    modules: list[str],
    per_module: int,
    report: Callable[[Result], None],
) -> list[Result]:
    """Plant ``per_module`` mutants in each module, one at a time, in a scratch copy."""
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="cortexgraph-mutate-") as scratch:
        work = _scratch_copy(Path(scratch))
        for module in modules:
            tests = TARGETS[module]
            path = work / PACKAGE / module
            original = path.read_text()
            base_outcome, base_seconds, base_detail = _run_tests(work, tests, 900)
            if base_outcome != "survived":
                raise SystemExit(f"{module}: its tests fail unmutated: {base_detail}")
            limit = max(30.0, 3 * base_seconds)
            every = sites(original)
            chosen = sorted(
                random.Random(module).sample(every, min(per_module, len(every))),
                key=lambda s: (s.line, s.kind, s.index),
            )
            for site in chosen:
                try:
                    path.write_text(mutate(original, site))
                    outcome, seconds, detail = _run_tests(work, tests, limit)
                finally:
                    path.write_text(original)
                result = Result(module, site, outcome, round(seconds, 1), detail)
                results.append(result)
                report(result)
    return results


def recheck(previous: Path, tests: list[str], report: Callable[[Result], None]) -> list[Result]:
    """Run each survivor of an earlier run (its ``--json`` file) again against ``tests``
    (by default the whole fast suite): a mutant only one module's tests missed may be
    killed by another's. Killed and timed-out mutants are kept as they were."""
    earlier = json.loads(previous.read_text())["results"]
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="cortexgraph-mutate-") as scratch:
        work = _scratch_copy(Path(scratch))
        for row in earlier:
            site = Site(**row["site"])
            if row["outcome"] != "survived":
                results.append(Result(row["module"], site, row["outcome"], row["seconds"],
                                      row["detail"]))
                continue
            path = work / PACKAGE / row["module"]
            original = path.read_text()
            try:
                path.write_text(mutate(original, site))
                outcome, seconds, detail = _run_tests(work, tests, 1800)
            finally:
                path.write_text(original)
            result = Result(row["module"], site, outcome, round(seconds, 1), detail)
            results.append(result)
            report(result)
    return results


def _scratch_copy(scratch: Path) -> Path:
    work = scratch / "repo"
    shutil.copytree(
        ROOT, work, ignore=shutil.ignore_patterns(".venv", ".git", "*.pyc", ".*_cache")
    )
    shared = ROOT.parent / "shared"
    if shared.exists():
        (scratch / "shared").symlink_to(shared)
    return work


def summary(results: list[Result]) -> list[dict[str, object]]:
    rows = []
    for module in dict.fromkeys(r.module for r in results):
        mine = [r for r in results if r.module == module]
        killed = sum(r.outcome != "survived" for r in mine)
        rows.append(
            {
                "module": module,
                "mutants": len(mine),
                "killed": killed,
                "rate": round(killed / len(mine), 3) if mine else None,
                "survivors": [
                    f"{r.site.function}:{r.site.line} {r.site.kind}" for r in mine
                    if r.outcome == "survived"
                ],
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", action="append", help="only these (e.g. core/keys.py)")
    parser.add_argument("--per-module", type=int, default=12, help="mutants per module")
    parser.add_argument("--json", default=None, help="write every result to this file")
    parser.add_argument("--show", action="store_true", help="print the sites and exit")
    parser.add_argument(
        "--recheck",
        default=None,
        help="a --json file of an earlier run: run its survivors against the fast suite",
    )
    parser.add_argument(
        "--tests", nargs="+", default=None, help="with --recheck: these test files instead"
    )
    args = parser.parse_args(argv)
    modules = args.module or list(TARGETS)
    for module in modules:
        if module not in TARGETS:
            parser.error(f"unknown module {module!r}; choose from {', '.join(TARGETS)}")
    if args.show:
        for module in modules:
            every = sites((ROOT / PACKAGE / module).read_text())
            print(f"{module}: {len(every)} sites")
        return 0

    def report(result: Result) -> None:
        print(
            f"{result.outcome:<8} {result.module}:{result.site.line} {result.site.function}"
            f" {result.site.kind}#{result.site.index} ({result.seconds} s) {result.detail}",
            file=sys.stderr,
            flush=True,
        )

    if args.recheck:
        fast = [*(args.tests or ["tests"]), "-m", "not slow"]
        results = recheck(Path(args.recheck), fast, report)
    else:
        results = run(modules, args.per_module, report)
    rows = summary(results)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"results": [asdict(r) for r in results], "summary": rows}, indent=1
            )
        )
    print("| module | mutants | killed | rate |\n|---|---:|---:|---:|")
    for row in rows:
        print(f"| `{row['module']}` | {row['mutants']} | {row['killed']} | {row['rate']:.0%} |")
    total = sum(int(row["mutants"]) for row in rows)  # type: ignore[call-overload]
    killed = sum(int(row["killed"]) for row in rows)  # type: ignore[call-overload]
    print(f"| all | {total} | {killed} | {killed / max(total, 1):.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
