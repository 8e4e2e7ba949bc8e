"""Fleet verification: every actor's store under one directory, verified in parallel on a
local process pool and on a local Ray runtime, reports exactly the tampered store."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import lmdb
import pytest

import cortexgraph as cg
from cortexgraph.cli import main
from cortexgraph.fleet import find_actors, verify_fleet

T0 = 1_700_000_000_000
ACTORS = 50
TAMPERED = "actor-17"


def _tamper(store: Path) -> None:
    """Rewrite journal entry 2 in place with one letter of its text changed (still
    canonical CBOR, so only the commitments can tell)."""
    env = lmdb.open(str(store), max_dbs=32)
    try:
        db = env.open_db(b"journal", create=False)
        with env.begin(write=True, db=db) as txn:
            key = (2).to_bytes(8, "big")
            entry = bytes(txn.get(key))
            assert b"memory 1 of" in entry
            txn.put(key, entry.replace(b"memory 1 of", b"memory 7 of"))
    finally:
        env.close()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """50 small stores (3 memories, an edge and a snapshot each); one tampered."""
    root = tmp_path_factory.mktemp("fleet")
    for n in range(ACTORS):
        with cg.open(root, f"actor-{n:02d}", clock=cg.ManualClock(T0), sync=False) as cx:
            uris = [cx.write(cg.Fact(text=f"memory {i} of {n}", tags=["t"])) for i in range(3)]
            cx.add_edge(uris[0], uris[1], "relates_to")
            cx.snapshot()
    _tamper(root / TAMPERED)
    (root / "not-a-store").mkdir()
    return root


def test_the_process_pool_reports_exactly_the_tampered_store(
    fleet: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify-fleet --no-ray on 50 stores exits 1 and reports exactly the tampered actor
    (first diverging seq 2) and every other one as ok, in the table and in --json; the
    directory that holds no store is not listed."""
    assert len(find_actors(fleet)) == ACTORS
    report = verify_fleet(fleet, engine="processes", workers=2)
    assert report.engine == "processes" and not report.ok
    assert report.failed == (TAMPERED,)
    [bad] = [a for a in report.actors if not a.ok]
    assert bad.first_bad_seq == 2 and all(a.entries == 4 for a in report.actors)
    code = main(["verify-fleet", str(fleet), "--no-ray", "--workers", "2", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["failed"] == [TAMPERED] and len(data["actors"]) == ACTORS
    code = main(["verify-fleet", str(fleet), "--no-ray", "--workers", "2"])
    text = capsys.readouterr().out
    assert code == 1 and f"{ACTORS - 1} of {ACTORS} stores ok, 1 failed" in text
    [row] = [line for line in text.splitlines() if "FAILED" in line]
    assert row.split()[0] == TAMPERED


@pytest.mark.slow
def test_a_local_ray_runtime_reports_exactly_the_tampered_store(fleet: Path) -> None:
    """On a local Ray runtime of 2 CPUs (started by the test, joined by verify_fleet),
    one Ray task per store gives the same reports as the process pool."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        report = verify_fleet(fleet, engine="ray")
    finally:
        ray.shutdown()
    pooled = verify_fleet(fleet, engine="processes", workers=2)
    assert report.engine == "ray" and report.failed == (TAMPERED,)
    strip = [(a.actor, a.ok, a.entries, a.overall_root, a.first_bad_seq, a.problems)
             for a in report.actors]
    assert strip == [(a.actor, a.ok, a.entries, a.overall_root, a.first_bad_seq, a.problems)
                     for a in pooled.actors]


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No store under the directory, or no directory, exits 2; a bad engine or worker
    count is a ValidationError naming it; an address with the process engine too."""
    assert main(["verify-fleet", str(tmp_path), "--no-ray"]) == 2
    assert "no cortexgraph store" in capsys.readouterr().err
    assert main(["verify-fleet", str(tmp_path / "missing"), "--no-ray"]) == 2
    for kwargs, field in (({"engine": "spark"}, "engine"), ({"workers": 0}, "workers"),
                          ({"engine": "processes", "address": "auto"}, "address")):
        with pytest.raises(cg.ValidationError) as info:
            verify_fleet(tmp_path, **kwargs)  # type: ignore[arg-type]
        assert info.value.field == field
    shutil.rmtree(tmp_path)


def test_the_ray_engine_without_ray_says_which_extra(
    fleet: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With Ray not importable, engine="ray" raises MissingExtraError naming the 'ray'
    extra, `verify-fleet --ray ADDRESS` exits 1 saying so, and the default engine falls
    back to the process pool."""
    monkeypatch.setitem(sys.modules, "ray", None)  # None in sys.modules: not importable
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    with pytest.raises(cg.MissingExtraError) as info:
        verify_fleet(fleet, engine="ray")
    assert info.value.extra == "ray"
    assert main(["verify-fleet", str(fleet), "--ray", "auto"]) == 1
    assert "cortexgraph[ray]" in capsys.readouterr().err
    assert verify_fleet(fleet, workers=2).engine == "processes"


def test_each_actors_signed_checkpoints_are_checked_with_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify-fleet --keys DIR checks each actor's checkpoints with DIR/<actor>.key.pub:
    the actors whose checkpoints verify pass; one signed with another key, one with no
    key file and one with no checkpoint fail, each naming why; --key with one actor's key
    passes that actor only."""
    keys = tmp_path / "keys"
    keys.mkdir()
    stores = tmp_path / "stores"
    signers = {}
    for actor in ("ann", "bob", "cat", "dan", "eve"):
        assert main(["keygen", str(keys / f"{actor}.key"), "--actor", actor, "--json"]) == 0
        signers[actor] = cg.SigningKey.from_text((keys / f"{actor}.key").read_text())
    capsys.readouterr()
    (keys / "dan.key.pub").unlink()
    for actor in ("ann", "bob", "cat", "dan", "eve"):
        with cg.open(stores, actor, clock=cg.ManualClock(T0), sync=False) as cx:
            cx.write(cg.Fact(text=f"{actor} deploys through CI", tags=["deploy"]))
            if actor == "cat":
                cx.snapshot(sign_with=signers["ann"])
            elif actor != "eve":
                cx.snapshot(sign_with=signers[actor])
    code = main(["verify-fleet", str(stores), "--no-ray", "--workers", "2", "--keys", str(keys),
                 "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["failed"] == ["cat", "dan", "eve"]
    problems = {a["actor"]: a["problems"] for a in data["actors"]}
    assert problems["ann"] == problems["bob"] == []
    assert "no checkpoint signed by key cortexgraph/cat" in problems["cat"][0]
    assert "no verifier key was given" in problems["dan"][0]
    assert "no checkpoint signed" in problems["eve"][0]
    code = main(["verify-fleet", str(stores), "--no-ray", "--key", str(keys / "ann.key.pub"),
                 "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["failed"] == ["bob", "dan", "eve"]  # cat holds ann's checkpoint
