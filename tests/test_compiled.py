"""The compiled modules (``cortexgraph.compiled``): the same bytes as their sources, and
the switch back to the sources whenever the compiled form cannot be trusted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cortexgraph as cg
from cortexgraph import cli, compiled

PACKAGE = Path(cg.__file__).resolve().parent

_WORKLOAD = textwrap.dedent(
    """
    import json, sys
    import cortexgraph as cg
    from cortexgraph import compiled
    import cortexgraph.core.segments as segments

    root = sys.argv[1]
    at = 1_700_000_000_000
    with cg.open(root, "agent", sync=False) as cx:
        uris = []
        for start in range(0, 300, 60):
            with cx.batch() as b:
                for i in range(start, start + 60):
                    at += 1
                    text = f"deploy {i % 7} pipeline friday number{i} café naïve {i * i}"
                    uris.append(b.write(cg.Fact(text=text, tags=[f"t{i % 5}"]), at=at))
        for i in range(0, 300, 9):
            at += 1
            cx.update(uris[i], text=f"revised {i} deploy window", at=at)
        for i in range(1, 300, 13):
            at += 1
            cx.add_edge(uris[i], uris[i + 1], "relates_to", strength=0.5, at=at)
        for i in range(2, 300, 17):
            at += 1
            cx.tombstone(uris[i], reason="test", at=at)
        hits = [str(h.uri) for h in cx.recall("deploy friday window", mode="keyword", k=10).hits]
        print(json.dumps({
            "compiled": compiled.state()[0],
            "file": segments.__file__,
            "root": cx.overall_root().hex(),
            "tables": cx.table_digests(),
            "hits": hits,
        }))
    """
)


def _run(tmp_path: Path, name: str, pure: str) -> dict[str, object]:
    script = tmp_path / "workload.py"
    script.write_text(_WORKLOAD)
    env = dict(os.environ, CORTEXGRAPH_PURE_PYTHON=pure)
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path / name)],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_the_compiled_modules_write_the_bytes_their_sources_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same operations, run by the compiled modules and by their sources, leave the
    same root, the same derived tables byte for byte, and the same recall answer; and a
    process that does not ask for the sources runs compiled exactly when this checkout's
    build made them (in ``make pytest``'s first pass, it must)."""
    pure = _run(tmp_path, "pure", "1")
    native = _run(tmp_path, "native", "0")
    monkeypatch.setenv(compiled.ENV, "0")
    assert native["compiled"] is compiled.decide(PACKAGE)[0]
    assert pure["compiled"] is False and str(pure["file"]).endswith(".py")
    if native["compiled"]:
        assert str(native["file"]).endswith(".so")
    assert native["root"] == pure["root"]
    assert native["tables"] == pure["tables"]
    assert native["hits"] == pure["hits"] and len(pure["hits"]) == 10  # type: ignore[arg-type]


def _package_copy(tmp_path: Path) -> Path:
    """The sources of the compiled modules under a package directory of their own, with
    the build's record of them."""
    copy = tmp_path / "cortexgraph"
    for name in compiled.MODULES:
        relative = Path(*name.split(".")[1:]).with_suffix(".py")
        (copy / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PACKAGE / relative, copy / relative)
    shutil.copyfile(PACKAGE / compiled.NATIVE_SOURCE, copy / compiled.NATIVE_SOURCE)
    digests = compiled.source_digests(copy)
    (copy / compiled.SOURCES_FILE).write_text(json.dumps(digests), encoding="utf-8")
    return copy


def test_an_edited_source_runs_as_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source that differs from the one the build compiled is named, and the modules run
    as sources (the C SMT with them): an edited checkout never runs stale compiled code."""
    monkeypatch.delenv(compiled.ENV, raising=False)
    copy = _package_copy(tmp_path)
    before = compiled.decide(copy)
    assert before[1] != "no compiled modules were built"
    with (copy / "core" / "text.py").open("a", encoding="utf-8") as source:
        source.write("\n# edited\n")
    assert compiled.decide(copy) == (
        False,
        "sources changed since the build: cortexgraph.core.text",
    )
    with (copy / compiled.NATIVE_SOURCE).open("a", encoding="utf-8") as source:
        source.write("\n/* edited */\n")
    assert compiled.decide(copy) == (
        False,
        "sources changed since the build: cortexgraph.core.smt_native, cortexgraph.core.text",
    )


def test_no_record_or_the_switch_means_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the build's record the modules run as sources, and CORTEXGRAPH_PURE_PYTHON
    (anything but "" and "0") asks for the sources whatever was built."""
    monkeypatch.delenv(compiled.ENV, raising=False)
    copy = _package_copy(tmp_path)
    monkeypatch.setenv(compiled.ENV, "1")
    assert compiled.decide(copy) == (False, f"{compiled.ENV} is set")
    monkeypatch.setenv(compiled.ENV, "0")
    assert compiled.decide(copy)[1] != f"{compiled.ENV} is set"
    (copy / compiled.SOURCES_FILE).unlink()
    assert compiled.decide(copy) == (False, "no compiled modules were built")
    (copy / compiled.SOURCES_FILE).write_text("{not json", encoding="utf-8")
    assert compiled.decide(copy) == (False, "no compiled modules were built")


def test_the_version_says_how_the_modules_run(capsys: pytest.CaptureFixture[str]) -> None:
    """``cortexgraph --version`` names the version and how the hot modules run."""
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"cortexgraph {cg.__version__}: {len(compiled.MODULES)} hot modules run")
    assert ("compiled" if compiled.state()[0] else "as sources") in out
