"""The `cortexgraph` command: every command, --json output, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cortexgraph.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_remember_get_update_forget_journal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A memory's whole life through the CLI, checked through --json output."""
    root = ["--root", str(tmp_path), "--actor", "cli", "--json"]
    code, out, _ = run(capsys, "init", *root, "--hash", "sha256")
    assert code == 0 and json.loads(out)["hash_name"] == "sha256"
    code, out, _ = run(
        capsys, "remember", "Deploys go through CI", "--tag", "Deploy", "--priority", "8", *root
    )
    assert code == 0
    uri = json.loads(out)["uri"]
    assert uri.startswith("cx://cli/default/") and uri.endswith("@1")

    code, out, _ = run(capsys, "get", uri, *root)
    record = json.loads(out)
    assert record["memory"] == {
        "type": "fact",
        "text": "Deploys go through CI",
        "tags": ["deploy"],
        "confidence": 1.0,
        "priority": 8,
    }
    assert (record["version"], record["status"], record["seq"]) == (1, "active", 1)

    code, out, _ = run(
        capsys, "update", uri, "--text", "Deploys go through Argo", *root, "--expected-version", "1"
    )
    assert code == 0 and json.loads(out)["uri"].endswith("@2")
    code, out, _ = run(capsys, "forget", uri, "--reason", "moved", *root)
    assert code == 0
    code, out, _ = run(capsys, "get", uri, "--history", *root)
    assert [r["version"] for r in json.loads(out)] == [1, 2]
    assert {r["status"] for r in json.loads(out)} == {"tombstoned"}

    code, out, _ = run(capsys, "journal", *root)
    entries = [json.loads(line) for line in out.splitlines()]
    assert [e["op"] for e in entries] == ["write", "update", "tombstone"]
    assert entries[2]["reason"] == "moved"

    code, out, _ = run(capsys, "inspect", *root)
    stats = json.loads(out)
    assert stats["seq"] == 3 and stats["memories"] == 1 and stats["tables"]["versions"] == 2


def test_human_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --json the output is lines for people."""
    root = ["--root", str(tmp_path)]
    _, out, _ = run(capsys, "remember", "hello there", "--type", "preference", *root)
    uri = out.strip()
    code, out, _ = run(capsys, "get", uri, *root)
    assert code == 0 and "[preference] v1/1" in out and "hello there" in out
    code, out, _ = run(capsys, "journal", *root)
    assert "write" in out and out.count("\n") == 1


def test_library_errors_exit_1_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A refused operation exits 1 and says why on stderr (JSON with --json)."""
    root = ["--root", str(tmp_path)]
    run(capsys, "init", *root)
    code, _, err = run(capsys, "get", "cx://agent/default/" + "0" * 32, *root)
    assert code == 1 and "NotFoundError" in err
    code, _, err = run(capsys, "remember", "x", "--priority", "11", *root, "--json")
    assert code == 1 and json.loads(err)["error"] == "ValidationError"
    code, _, err = run(capsys, "get", "cx://agent/default/abc#latest", *root)
    assert code == 1 and "fragment" in err
    code, _, err = run(
        capsys, "get", "cx://agent/default/" + "0" * 32, "--root", str(tmp_path / "none")
    )
    assert code == 1 and "no cortexgraph environment" in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse usage errors exit 2."""
    with pytest.raises(SystemExit) as caught:
        main(["remember"])
    assert caught.value.code == 2
    with pytest.raises(SystemExit) as caught:
        main(["no-such-command"])
    assert caught.value.code == 2


def test_demo_runs_and_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo succeeds, and two runs print the same URIs and digests."""
    code, out1, _ = run(capsys, "demo", "--json", "--dir", str(tmp_path / "a"))
    assert code == 0
    code, out2, _ = run(capsys, "demo", "--json", "--dir", str(tmp_path / "b"))
    first, second = json.loads(out1), json.loads(out2)
    assert first["identical_twin"] is True
    assert first["uris"] == second["uris"] and first["digests"] == second["digests"]
    assert first["context_digest"] == second["context_digest"]
    # 5 writes, update, 2 head moves, tombstone (the failed batch leaves nothing), a write
    # and 3 edges, attest (2 writes), compact (2 archived), a final write
    assert first["seq"] == 9 + 4 + 2 + 2 + 1


def test_find_link_traverse_unlink(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Queries and the graph through the CLI: find ranks and renders, link adds an edge
    (human origin by default, so supersedes is allowed), traverse follows it, unlink
    removes it, and a too-broad query exits 1 with the typed error on stderr."""
    root = ["--root", str(tmp_path), "--actor", "cli", "--json"]
    _, out, _ = run(capsys, "remember", "Deploys go through CI", "--tag", "deploy", *root)
    ci = json.loads(out)["uri"]
    _, out, _ = run(capsys, "remember", "Deploy window", "--tag", "deploy", "--priority", "9",
                    *root)
    window = json.loads(out)["uri"]
    code, out, _ = run(capsys, "find", "--type", "fact", "--tag", "deploy", *root)
    found = json.loads(out)
    assert code == 0
    assert [h["uri"] for h in found["hits"]] == [window, ci]
    assert found["hits"][0]["text"] == "[fact] Deploy window #deploy"
    assert found["matched"] == 2 and found["tokens"] == sum(h["tokens"] for h in found["hits"])
    code, out, _ = run(capsys, "link", window, "supersedes", ci, *root)
    assert code == 0 and json.loads(out)["origin"] == "human"
    code, out, _ = run(capsys, "traverse", window, "--depth", "2", *root)
    walked = json.loads(out)["found"]
    assert [(w["depth"], w["uri"], w["relation"]) for w in walked] == [
        (1, ci.split("@")[0], "supersedes")
    ]
    code, out, _ = run(capsys, "unlink", window, "supersedes", ci, *root)
    assert code == 0
    _, out, _ = run(capsys, "traverse", window, *root)
    assert json.loads(out)["found"] == []
    code, _, err = run(capsys, "find", "--ns", "default", *root)
    assert code == 1 and json.loads(err)["error"] == "TooBroadQueryError"


def test_recall_context_compact_and_scopes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """recall, context, compact and scope export/verify through the CLI, with --json; a
    tampered bundle exits 1 with VerificationError."""
    root = ["--root", str(tmp_path / "s"), "--actor", "cli", "--json"]
    run(capsys, "remember", "Deploys go through CI", "--tag", "deploy", *root)
    run(capsys, "remember", "Never push to main", "--tag", "deploy", "--type", "constraint",
        *root)
    code, out, _ = run(capsys, "recall", "how do we deploy", "--mode", "keyword", *root)
    assert code == 0 and json.loads(out)["hits"][0]["text"] == "Deploys go through CI"
    code, out, _ = run(capsys, "context", "--budget-tokens", "100", *root)
    bundle = json.loads(out)
    assert code == 0 and bundle["tokens"] <= 100 and "Never push to main" in bundle["text"]
    code, out, _ = run(capsys, "compact", *root)
    assert code == 0 and json.loads(out)["archived"] == []
    file = str(tmp_path / "scope.cbor")
    code, out, _ = run(capsys, "scope", "export", file, "--tag", "deploy", *root)
    exported = json.loads(out)
    assert code == 0 and exported["bytes"] == Path(file).stat().st_size
    code, out, _ = run(capsys, "scope", "verify", file, "--trusted-root",
                       exported["overall_root"], *root)
    assert code == 0 and json.loads(out)["memories"] == 2
    data = bytearray(Path(file).read_bytes())
    data[-5] ^= 1
    Path(file).write_bytes(bytes(data))
    code, _, err = run(capsys, "scope", "verify", file, *root)
    assert code == 1 and json.loads(err)["error"] == "VerificationError"


def test_scope_verify_without_a_trusted_root_says_not_verified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --trusted-root a self-consistent bundle is reported as NOT verified against
    a trusted root and the command exits 1 (a script testing the status cannot mistake it
    for a verified one); --json says which check ran. A malformed root is a usage error
    (exit 2), not a traceback."""
    root = ["--root", str(tmp_path / "s"), "--actor", "cli"]
    run(capsys, "remember", "Deploys go through CI", "--tag", "deploy", *root)
    file = str(tmp_path / "scope.cbor")
    code, out, _ = run(capsys, "scope", "export", file, "--tag", "deploy", *root, "--json")
    trusted = json.loads(out)["overall_root"]

    code, out, _ = run(capsys, "scope", "verify", file, *root)
    assert code == 1 and "NOT verified against a trusted root" in out
    assert not out.startswith("verified")
    code, out, _ = run(capsys, "scope", "verify", file, *root, "--json")
    report = json.loads(out)
    assert code == 1
    assert (report["ok"], report["consistent"], report["trusted_root_checked"]) == (
        False, True, False)
    code, out, _ = run(capsys, "scope", "verify", file, "--trusted-root", trusted, *root,
                       "--json")
    report = json.loads(out)
    assert code == 0 and (report["ok"], report["trusted_root_checked"]) == (True, True)
    code, out, _ = run(capsys, "scope", "verify", file, "--trusted-root", trusted, *root)
    assert code == 0 and out.startswith("verified against the trusted root: 1 memories")

    for bad in ("zz", trusted[:-2], trusted + "00", ""):
        with pytest.raises(SystemExit) as info:
            main(["scope", "verify", file, "--trusted-root", bad, *root])
        assert info.value.code == 2
        assert "must be 64 hex digits" in capsys.readouterr().err


def test_journal_since_past_the_end_prints_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`journal --since` accepts any non-negative integer, however large (none past the
    end: no traceback); a negative or non-integer one is a usage error (exit 2)."""
    root = ["--root", str(tmp_path), "--json"]
    run(capsys, "remember", "one", *root)
    run(capsys, "remember", "two", *root)
    code, out, _ = run(capsys, "journal", "--since", "1", *root)
    assert code == 0 and [json.loads(line)["seq"] for line in out.splitlines()] == [2]
    for since in ("2", str(2**64 - 1), str(2**64), "99999999999999999999999"):
        code, out, err = run(capsys, "journal", "--since", since, *root)
        assert (code, out, err) == (0, "", ""), since
    for bad in ("-1", "1.5", "x"):
        with pytest.raises(SystemExit) as info:
            main(["journal", "--since", bad, *root])
        assert info.value.code == 2
        assert "non-negative integer" in capsys.readouterr().err
