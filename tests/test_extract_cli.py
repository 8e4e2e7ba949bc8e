"""``cortexgraph extract``: the CLI runs ingest through the public API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cortexgraph.cli import main


def _transcript(tmp_path: Path) -> Path:
    path = tmp_path / "session.jsonl"
    lines = [
        {"role": "user", "text": "Never push directly to main."},
        {"role": "assistant", "text": "We decided to use SQLite. Run `make test` first."},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def test_extract_writes_then_reruns_idempotently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first run writes the rule extractor's three memories; the second, over the
    same file, writes nothing and reports the cursor at both turns."""
    args = ["extract", str(_transcript(tmp_path)), "--root", str(tmp_path / "s"), "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert len(first["written"]) == 3 and first["cursor"] == 2
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["written"] == [] and second["turns"] == 0


def test_bad_transcript_exits_1_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A transcript with a truncated line exits 1 with a ValidationError naming it."""
    path = tmp_path / "bad.jsonl"
    path.write_text('{"role": "user", "text": "ok"}\n{"role": ', encoding="utf-8")
    assert main(["extract", str(path), "--root", str(tmp_path / "s")]) == 1
    assert "line 2: not JSON" in capsys.readouterr().err


def test_http_extractor_without_a_url_is_a_validation_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--extractor http without --base-url exits 1 naming base_url."""
    args = ["extract", str(_transcript(tmp_path)), "--root", str(tmp_path / "s"),
            "--extractor", "http", "--api-key-env", ""]
    assert main(args) == 1
    assert "base_url" in capsys.readouterr().err
