"""The mem0-compatible API: mem0's quick start unchanged, its shapes, history, filters, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cortexgraph as cg
from cortexgraph.extract import Candidate, ExtractionInput
from cortexgraph.integrations.mem0 import Memory

QUICKSTART = Path(__file__).parent / "fixtures" / "mem0" / "quickstart.py"
T0 = 1_700_000_000_000
T0_ISO = "2023-11-14T22:13:20+00:00"

#: The keys of mem0 2.x's result dicts (MemoryItem's fields plus the promoted ids).
ADD_KEYS = {"id", "memory", "event"}
ITEM_KEYS = {"id", "memory", "hash", "metadata", "created_at", "updated_at", "user_id"}
HISTORY_KEYS = {
    "id", "memory_id", "old_memory", "new_memory", "event", "created_at", "updated_at",
    "is_deleted", "actor_id", "role",
}


@pytest.fixture
def clock() -> cg.ManualClock:
    return cg.ManualClock(T0)


@pytest.fixture
def m(tmp_path: Path, clock: cg.ManualClock) -> Iterator[Memory]:
    memory = Memory.from_config(
        {"cortexgraph": {"root": str(tmp_path / "stores"), "clock": clock, "sync": False}}
    )
    with memory:
        yield memory


def test_quickstart_runs_unchanged_with_only_the_mem0_module_swapped(tmp_path: Path) -> None:
    """mem0's quick start, whose only tie to mem0 is ``from mem0 import Memory``, runs
    against a module ``mem0`` that re-exports our Memory, and every result has mem0's shape."""
    alias = tmp_path / "alias" / "mem0"
    alias.mkdir(parents=True)
    (alias / "__init__.py").write_text("from cortexgraph.integrations.mem0 import Memory\n")
    src = Path(cg.__file__).parents[1]
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(alias.parent), str(src)]),
        CORTEXGRAPH_ROOT=str(tmp_path / "stores"),
    )
    done = subprocess.run(
        [sys.executable, str(QUICKSTART)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)

    [added] = out["added"]["results"]
    assert set(added) == ADD_KEYS and added["event"] == "ADD"
    assert added["memory"] == "I love basketball and gaming."
    [raw] = out["raw"]["results"]
    assert raw == {**raw, "memory": "I prefer tea over coffee", "event": "ADD", "role": "user"}
    assert set(raw) == ADD_KEYS | {"actor_id", "role"}

    assert out["found"]["results"], "the search finds the basketball memory"
    top = out["found"]["results"][0]
    assert set(top) == ITEM_KEYS | {"score"} and top["id"] == added["id"]
    assert 0 < top["score"] <= 1 and top["metadata"] == {"category": "hobbies"}
    assert {r["memory"] for r in out["listed"]["results"]} == {
        "I love basketball and gaming.", "I prefer tea over coffee"}
    # a message stored as is also carries its role, as in mem0
    assert [set(r) for r in out["listed"]["results"]] == [ITEM_KEYS | {"role"}, ITEM_KEYS]
    assert set(out["one"]) == ITEM_KEYS | {"score"} and out["one"]["score"] is None

    assert out["updated"] == {"message": "Memory updated successfully!"}
    assert [h["event"] for h in out["history_after_update"]] == ["ADD", "UPDATE"]
    assert out["deleted"] == {"message": "Memory deleted successfully!"}
    assert [h["event"] for h in out["history_after_delete"]] == ["ADD", "UPDATE", "DELETE"]
    assert all(set(h) == HISTORY_KEYS for h in out["history_after_delete"])
    assert out["deleted_all"] == {"message": "Memories deleted successfully!"}
    assert out["after"] == {"results": []}


def test_history_is_read_from_the_versions_and_the_journal(
    m: Memory, clock: cg.ManualClock
) -> None:
    """history gives ADD, each UPDATE with old and new text, and DELETE, with the journal
    times of each, and keeps it after the memory is deleted."""
    [r] = m.add("I prefer tabs over spaces", user_id="alex")["results"]
    clock.advance(1000)
    m.update(r["id"], "I prefer spaces over tabs")
    clock.advance(1000)
    m.delete(r["id"])
    rows = m.history(r["id"])
    assert [(h["event"], h["old_memory"], h["new_memory"], h["is_deleted"]) for h in rows] == [
        ("ADD", None, "I prefer tabs over spaces", False),
        ("UPDATE", "I prefer tabs over spaces", "I prefer spaces over tabs", False),
        ("DELETE", "I prefer spaces over tabs", None, True),
    ]
    assert [h["updated_at"] for h in rows] == [
        T0_ISO, "2023-11-14T22:13:21+00:00", "2023-11-14T22:13:22+00:00"]
    assert {h["created_at"] for h in rows} == {T0_ISO}
    assert all(h["memory_id"] == r["id"] for h in rows)
    assert m.get(r["id"]) is None
    ops = [e.op for e in m.cortex("alex").journal() if e.ns == "default"]
    assert ops == ["write", "update", "tombstone"], "the journal keeps the audit trail"


def test_add_dedups_a_fact_already_stored_in_the_same_scope(m: Memory) -> None:
    """Adding the same fact again writes nothing and answers NONE with the existing id;
    the same text in another scope (a run) is a memory of its own."""
    first = m.add("Never push to main.", user_id="alex")["results"]
    again = m.add("Never push to main.", user_id="alex")["results"]
    other_run = m.add("Never push to main.", user_id="alex", run_id="r1")["results"]
    assert [r["event"] for r in first] == ["ADD"]
    assert again == [{"id": first[0]["id"], "memory": "Never push to main.", "event": "NONE"}]
    assert other_run[0]["event"] == "ADD" and other_run[0]["id"] != first[0]["id"]
    assert len(m.get_all(filters={"user_id": "alex"})["results"]) == 2
    assert len(m.get_all(filters={"user_id": "alex", "run_id": "r1"})["results"]) == 1


def test_infer_runs_the_configured_extractor(tmp_path: Path) -> None:
    """infer=True writes what the configured extractor returns, typed as it says."""

    class Fixed:
        def extract(self, source: ExtractionInput) -> list[Candidate]:
            return [Candidate(type="goal", text="Ship the release on Friday", confidence=0.9)]

    config = {"cortexgraph": {"root": str(tmp_path), "extractor": Fixed(), "sync": False}}
    with Memory(config) as m:
        [r] = m.add("anything at all", agent_id="planner")["results"]
        assert r["memory"] == "Ship the release on Friday" and r["event"] == "ADD"
        assert m.cortex("planner").resolve(r["id"]).memory.type_name == "goal"


def test_infer_false_stores_each_non_system_message(m: Memory) -> None:
    """infer=False stores every user and assistant message as is, with role and name."""
    out = m.add(
        [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "hello there", "name": "sam"},
            {"role": "assistant", "content": "hi sam"},
        ],
        agent_id="bot",
        infer=False,
    )["results"]
    assert [(r["memory"], r["role"], r["actor_id"]) for r in out] == [
        ("hello there", "user", "sam"), ("hi sam", "assistant", None)]
    item = m.get(out[0]["id"])
    assert item is not None
    assert (item["agent_id"], item["role"], item["actor_id"]) == ("bot", "user", "sam")


def _memories(m: Memory) -> dict[str, str]:
    texts = {
        "low": ("I prefer red", {"level": 1, "team": "core", "note": "Fast path"}),
        "mid": ("I prefer green", {"level": 5, "team": "web"}),
        "high": ("I prefer blue", {"level": 9, "team": "core"}),
    }
    ids = {}
    for name, (text, metadata) in texts.items():
        [r] = m.add(text, user_id="u1", metadata=metadata, infer=False)["results"]
        ids[name] = r["id"]
    return ids


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"team": "core"}, {"low", "high"}),
        ({"level": {"eq": 5}}, {"mid"}),
        ({"team": {"ne": "core"}}, {"mid"}),
        ({"level": {"gt": 1}}, {"mid", "high"}),
        ({"level": {"gte": 5, "lt": 9}}, {"mid"}),
        ({"level": {"lte": 1}}, {"low"}),
        ({"team": {"in": ["web", "ops"]}}, {"mid"}),
        ({"team": {"nin": ["web"]}}, {"low", "high"}),
        ({"note": {"contains": "Fast"}}, {"low"}),
        ({"note": {"icontains": "fast"}}, {"low"}),
        ({"note": "*"}, {"low"}),
        ({"AND": [{"team": "core"}, {"level": {"gt": 1}}]}, {"high"}),
        ({"OR": [{"team": "web"}, {"level": 1}]}, {"low", "mid"}),
        ({"NOT": [{"team": "core"}]}, {"mid"}),
        ({"level": {"gt": "x"}}, set()),
    ],
)
def test_filter_operators(m: Memory, extra: dict[str, Any], expected: set[str]) -> None:
    """mem0's metadata operators select the same memories in get_all and in search."""
    ids = _memories(m)
    names = {v: k for k, v in ids.items()}
    listed = m.get_all(filters={"user_id": "u1", **extra})["results"]
    assert {names[r["id"]] for r in listed} == expected
    found = m.search("prefer", filters={"user_id": "u1", **extra}, threshold=0)["results"]
    assert {names[r["id"]] for r in found} == expected


def test_scopes_keep_users_agents_and_runs_apart(m: Memory, tmp_path: Path) -> None:
    """user_id picks the store (agent_id when there is no user), agent_id given with a
    user is recorded and filtered on, and run_id is the namespace."""
    [a] = m.add("I prefer tea", user_id="alex", agent_id="helper", infer=False)["results"]
    [b] = m.add("I prefer coffee", user_id="alex", infer=False)["results"]
    [c] = m.add("I prefer juice", agent_id="helper", run_id="r2", infer=False)["results"]
    assert a["id"].startswith("cx://alex/default/") and c["id"].startswith("cx://helper/r2/")
    both = m.get_all(filters={"user_id": "alex", "agent_id": "helper"})["results"]
    assert [r["id"] for r in both] == [a["id"]]
    assert {r["id"] for r in m.get_all(filters={"user_id": "alex"})["results"]} == {
        a["id"], b["id"]}
    assert [r["id"] for r in m.get_all(filters={"agent_id": "helper"})["results"]] == [c["id"]]
    assert m.get_all(filters={"user_id": "nobody"}) == {"results": []}
    assert not (m.root / "nobody").exists(), "a read never creates a store"


def test_search_honours_top_k_and_threshold(m: Memory) -> None:
    """top_k bounds the results, threshold 1 keeps only perfect scores, best first."""
    _memories(m)
    assert len(m.search("prefer", filters={"user_id": "u1"}, top_k=2)["results"]) == 2
    scores = [r["score"] for r in m.search("prefer blue", filters={"user_id": "u1"})["results"]]
    assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores)
    perfect = m.search("blue", filters={"user_id": "u1"}, threshold=1, explain=True)["results"]
    assert perfect and all(r["score"] == 1 for r in perfect)
    assert all(set(r["score_details"]) <= {"keyword", "vector"} for r in perfect)


def test_update_merges_metadata_and_keeps_the_ids(m: Memory, clock: cg.ManualClock) -> None:
    """update merges metadata, ignores identity keys in it, and moves updated_at."""
    [r] = m.add("I prefer vim", user_id="alex", metadata={"a": 1}, infer=False)["results"]
    clock.advance(5000)
    m.update(r["id"], metadata={"b": 2, "user_id": "mallory"})
    item = m.get(r["id"])
    assert item is not None
    assert item["metadata"] == {"a": 1, "b": 2} and item["user_id"] == "alex"
    assert item["updated_at"] == "2023-11-14T22:13:25+00:00", "a metadata change moves it"
    clock.advance(1000)
    m.update(r["id"], "I prefer neovim")
    item = m.get(r["id"])
    assert item is not None and item["memory"] == "I prefer neovim"
    assert item["updated_at"] == "2023-11-14T22:13:26+00:00" and item["created_at"] == T0_ISO
    assert list(item)[:7] == [
        "id", "memory", "hash", "metadata", "score", "created_at", "updated_at"]
    assert [(h["event"], h["old_memory"], h["new_memory"]) for h in m.history(r["id"])] == [
        ("ADD", None, "I prefer vim"),
        ("UPDATE", "I prefer vim", "I prefer vim"),
        ("UPDATE", "I prefer vim", "I prefer neovim"),
    ], "a metadata-only update is an UPDATE of the same text"
    m.update(r["id"], "I prefer helix", metadata={"c": 3})
    assert [h["new_memory"] for h in m.history(r["id"])][3:] == ["I prefer helix"], (
        "a text and metadata change in one update is one row"
    )


def test_expired_memories_are_hidden_until_asked_for(m: Memory, clock: cg.ManualClock) -> None:
    """A memory past its expiration_date (by the configured clock) leaves search and
    get_all unless show_expired=True; get still answers; update(expiration_date=None)
    clears it."""
    [r] = m.add("I prefer tea", user_id="alex", infer=False, expiration_date="2023-11-15")[
        "results"
    ]
    scope = {"user_id": "alex"}
    assert [x["id"] for x in m.get_all(filters=scope)["results"]] == [r["id"]]
    clock.advance(2 * 86_400_000)
    assert m.get_all(filters=scope) == {"results": []}
    assert m.search("tea", filters=scope) == {"results": []}
    assert [x["id"] for x in m.search("tea", filters=scope, show_expired=True)["results"]] == [
        r["id"]
    ]
    assert len(m.get_all(filters=scope, show_expired=True)["results"]) == 1
    item = m.get(r["id"])
    assert item is not None and item["expiration_date"] == "2023-11-15"
    m.update(r["id"], expiration_date=None)
    assert [x["id"] for x in m.get_all(filters=scope)["results"]] == [r["id"]]
    m.delete_all(user_id="alex")
    assert m.get_all(filters=scope, show_expired=True) == {"results": []}


def test_reset_tombstones_every_memory_under_the_root(m: Memory) -> None:
    """reset empties every scope; the journal keeps what was there."""
    m.add("I prefer tea", user_id="alex", infer=False)
    m.add("I prefer jazz", agent_id="dj", infer=False)
    m.reset()
    assert m.get_all(filters={"user_id": "alex"}) == {"results": []}
    assert m.get_all(filters={"agent_id": "dj"}) == {"results": []}


def _first(m: Memory) -> str:
    return str(m.get_all(filters={"user_id": "alex"})["results"][0]["id"])


def _root_digests(m: Memory) -> dict[str, bytes]:
    return {p.name: m.cortex(p.name).overall_root() for p in sorted(m.root.iterdir())}


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda m: m.add("x"), "At least one of 'user_id', 'agent_id', or 'run_id'"),
        (lambda m: m.add("x", user_id="   "), "cannot be empty"),
        (lambda m: m.add("x", user_id="a b"), "cannot contain whitespace"),
        (lambda m: m.add("x", user_id="Alex!"), "not a valid cortexgraph name"),
        (lambda m: m.add(42, user_id="alex"), "messages must be str, dict, or list"),
        (lambda m: m.add("x", user_id="alex", metadata={"f": {1, 2}}), "JSON values"),
        (lambda m: m.add("x", user_id="alex", memory_type="semantic"), "Invalid 'memory_type'"),
        (lambda m: m.add("x", user_id="alex", infer="yes"), "True or False"),
        (lambda m: m.add("x", user_id="alex", timestamp=1), "platform feature"),
        (lambda m: m.add("x", user_id="alex", expiration_date="soon"), "YYYY-MM-DD"),
        (lambda m: m.update(_first(m), expiration_date=3), "YYYY-MM-DD"),
        (lambda m: m.search("x", filters={}), "filters must contain at least one of"),
        (lambda m: m.search("x", user_id="alex"), "Top-level entity parameters"),
        (lambda m: m.search("  ", filters={"user_id": "alex"}), "Invalid query"),
        (lambda m: m.search("x", filters={"user_id": "alex"}, threshold=2), "threshold"),
        (lambda m: m.search("x", filters={"user_id": "alex"}, top_k=-1), "Invalid top_k"),
        (lambda m: m.get_all(filters={"user_id": "alex", "k": {"like": 1}}), "Unsupported"),
        (lambda m: m.get_all(filters={"user_id": "alex", "OR": []}), "non-empty list"),
        (lambda m: m.get_all(), "filters must contain at least one of"),
        (lambda m: m.update("cx://alex/default/" + "0" * 32, "y"), "not found"),
        (lambda m: m.update("cx://alex/default/" + "0" * 32), "At least one of text"),
        (lambda m: m.update(_first(m), 5), "must be a string"),
        (lambda m: m.update(_first(m), "y", metadata={"f": float("nan")}), "JSON values"),
        (lambda m: m.delete("cx://alex/default/" + "0" * 32), "not found"),
        (lambda m: m.delete_all(), r"use the `reset\(\)` method"),
        (lambda m: m.get("not-an-id"), "expected cx://"),
        (lambda m: m.add("x", user_id="alex", run_id="mem0-meta"), "reserved"),
        (lambda m: Memory({"cortexgraph": {"rooot": "x"}}), "unknown key"),
        (lambda m: Memory({"cortexgraph": {"root": 7}}), "must be a path"),
        (lambda m: Memory(["root"]), "must be a dict"),
        (lambda m: Memory({"cortexgraph": "root"}), "must be a dict"),
        (lambda m: Memory({"cortexgraph": {"extractor": 1}}), "extract"),
    ],
)
def test_bad_calls_raise_mem0s_errors_and_change_nothing(m: Memory, call: Any, match: str) -> None:
    """Every bad call raises a ValidationError (a ValueError, as mem0 raises) with mem0's
    message where mem0 has one, and leaves every store as it was."""
    m.add("I prefer tea", user_id="alex", infer=False)
    before = _root_digests(m)
    with pytest.raises(cg.ValidationError, match=match):
        call(m)
    assert _root_digests(m) == before


def test_unknown_ids_read_as_missing(m: Memory) -> None:
    """get answers None and history [] for an id of no memory, as mem0 does."""
    missing = "cx://ghost/default/" + "0" * 32
    assert m.get(missing) is None and m.history(missing) == []


def test_same_calls_give_the_same_ids_and_roots(tmp_path: Path) -> None:
    """Unlike mem0's random UUIDs, ids are deterministic: the same calls at the same clock
    times on two roots give equal results and byte-identical OverallRoots."""
    runs = []
    for name in ("one", "two"):
        config = {"cortexgraph": {"root": str(tmp_path / name), "clock": cg.ManualClock(T0),
                                  "sync": False}}
        with Memory(config) as m:
            added = m.add("Never push to main. I prefer rebase.", user_id="alex", run_id="r")
            m.update(added["results"][0]["id"], "Never force-push to main.")
            runs.append((added, m.history(added["results"][0]["id"]),
                         m.cortex("alex").overall_root()))
    assert runs[0][0]["results"][0]["event"] == "ADD"
    assert runs[0] == runs[1]
