"""Context bundles from a store (``cortexgraph.context``): selection, layers, bytes.

The packing itself is tested in ``tests/test_context.py``; these tests check what the
shell chooses (floor, foreground, background), that the result stays in budget, and that
it is byte-stable. Golden files: ``fixtures/context_bundle/<case>.txt`` holds, for each
case of ``tests/scripts/context_bundle_script.py``, the text, a ``---`` line, one
``layer form uri`` line per item and a ``tokens digest`` line. After an intended change,
regenerate them (that run fails, saying what it rewrote), review every diff by eye and run
again::

    CORTEXGRAPH_REGEN_GOLDEN=1 .venv/bin/python -m pytest tests/test_context_bundle.py -k golden
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import blake3
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.context import ContextBundle, caps_for, run_context
from cortexgraph.core.forms import estimate_tokens, render
from cortexgraph.core.packing import LAYERS, SECTION_HEADERS
from cortexgraph.errors import CortexError, ValidationError
from golden import check_golden
from strategies import memories

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "fixtures" / "context_bundle"
SCRIPT_PATH = Path(__file__).parent / "scripts" / "context_bundle_script.py"
T0 = 1_700_000_000_000


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("context_bundle_script", SCRIPT_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _load_script()


def context(cx: cg.Cortex, **kwargs: Any) -> ContextBundle:
    """``run_context`` with the defaults ``Cortex.context`` has."""
    args: dict[str, Any] = {"query": None, "channel": None, "now": None, "estimator": None}
    args.update(kwargs)
    return run_context(cx._handle, **args)


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, cg.MemoryURI]]:
    """The fixed store of the script, built once: ``(root, uris by name)``."""
    root = tmp_path_factory.mktemp("fixed")
    return root, SCRIPT.build(root)


@pytest.fixture
def fixed_cx(fixed: tuple[Path, dict[str, cg.MemoryURI]]) -> Any:
    root, _ = fixed
    with cg.open(root, SCRIPT.ACTOR, sync=False) as cx:
        yield cx


def layers_of(bundle: ContextBundle) -> dict[str, list[str]]:
    """The URIs (heads, as strings) of each layer, in text order."""
    found: dict[str, list[str]] = {layer: [] for layer in LAYERS}
    for uri, layer, _ in bundle.items:
        found[layer].append(str(uri.head))
    return found


def head(uri: cg.MemoryURI) -> str:
    return str(uri.head)


# ---------------------------------------------------------------------------
# budget, for any store


_TYPES = (cg.Goal, cg.Preference, cg.Constraint, cg.Fact, cg.Pattern, cg.Event, cg.ArtifactRef)


@st.composite
def stores(draw: st.DrawFn) -> list[tuple[cg.Memory, bool]]:
    """Up to 14 memories of the agent-facing types, each maybe tombstoned afterwards;
    Events on one of two channels."""
    found = []
    for memory in draw(st.lists(memories(*_TYPES), max_size=14)):
        if isinstance(memory, cg.Event):
            channel = draw(st.sampled_from(["chat", "ci", None]))
            memory = _with_channel(memory, channel)
        found.append((memory, draw(st.booleans())))
    return found


def _with_channel(event: cg.Event, channel: str | None) -> cg.Memory:
    data = dict(event.to_dict())
    data.pop("channel", None)
    if channel is not None:
        data["channel"] = channel
    return cg.Memory.from_dict(data)


# Events that occurred after the year 9999 (ISO years with a sign, as in "+10000-01-01")
# and at the latest instant, on a channel and matching the query.
_FAR_FUTURE = [
    (cg.Event(text="deploy done", channel="chat", occurred_at=occurred_at), False)
    for occurred_at in (253_402_300_799_999, 253_402_300_800_000, 2**63 - 1)
]


@settings(max_examples=40)
@example(store=_FAR_FUTURE, budget=700, query="deploy", channel="chat")
@example(store=_FAR_FUTURE, budget=60, query=None, channel="chat")
@given(
    store=stores(),
    budget=st.integers(0, 700),
    query=st.sampled_from([None, "deploy", "the api fails", "x"]),
    channel=st.sampled_from([None, "chat", "ci", "nowhere"]),
)
def test_budget_never_exceeded(
    store: list[tuple[cg.Memory, bool]], budget: int, query: str | None, channel: str | None
) -> None:
    """On random small stores, for any budget, query and channel: the bundle never costs
    more than the budget, its tokens are the estimate of its text, its layers come in
    order, and no tombstoned or execution-side memory appears."""
    root = Path(tempfile.mkdtemp(prefix="cg-ctx-"))
    try:
        with cg.open(root, "agent", sync=False) as cx:
            gone = set()
            for i, (memory, tombstone) in enumerate(store):
                uri = cx.write(memory, at=T0 + i * 1000)
                if tombstone:
                    cx.tombstone(uri, at=T0 + i * 1000 + 1)
                    gone.add(head(uri))
            if store:
                cx.attest([cx.write(cg.Fact(text="cited"), at=T0)], outcome="success", at=T0)
            bundle = context(cx, query=query, budget_tokens=budget, channel=channel, now=T0)
            assert bundle.tokens <= budget
            assert bundle.tokens == (estimate_tokens(bundle.text) if bundle.text else 0)
            order = [LAYERS.index(layer) for _, layer, _ in bundle.items]
            assert order == sorted(order)
            for uri, _, _ in bundle.items:
                assert head(uri) not in gone
                assert cx.resolve(uri).memory.type_name not in ("attest", "learn_weights")
    finally:
        shutil.rmtree(root)


def test_zero_budget_is_empty(fixed_cx: cg.Cortex) -> None:
    """A budget of 0 gives the empty bundle: no text, no items, 0 tokens."""
    bundle = context(fixed_cx, query=SCRIPT.QUERY, budget_tokens=0, now=SCRIPT.NOW)
    assert (bundle.text, bundle.items, bundle.tokens) == ("", (), 0)


# ---------------------------------------------------------------------------
# selection on the fixed store


def test_layer_order_in_items_and_text(fixed_cx: cg.Cortex) -> None:
    """Floor items come before foreground ones, and those before background ones, in
    ``items`` and in the text (whose section headers appear in that order too)."""
    bundle = context(
        fixed_cx, query=SCRIPT.QUERY, budget_tokens=2000, channel="slack", now=SCRIPT.NOW
    )
    layers = [layer for _, layer, _ in bundle.items]
    assert layers == sorted(layers, key=LAYERS.index)
    assert set(layers) == set(LAYERS)
    positions = [bundle.text.index(SECTION_HEADERS[layer]) for layer in LAYERS]
    assert positions == sorted(positions)
    assert bundle.text.startswith(SECTION_HEADERS["floor"] + "\n")


def test_floor_holds_pinned_goals_constraints_preferences(
    fixed_cx: cg.Cortex, fixed: tuple[Path, dict[str, cg.MemoryURI]]
) -> None:
    """With room for everything, the floor holds the pinned memory first, then the active
    Goals, every Constraint and Preference, and some Facts; not the abandoned Goal."""
    _, uris = fixed
    bundle = context(fixed_cx, budget_tokens=5000, now=SCRIPT.NOW)
    floor = layers_of(bundle)["floor"]
    assert floor[0] == head(uris["no-fridays"])
    for name in ("ship-v2", "docs-goal", "no-secrets", "review", "terse", "pytest"):
        assert head(uris[name]) in floor, name
    assert head(uris["old-goal"]) not in floor
    assert floor.index(head(uris["ship-v2"])) < floor.index(head(uris["no-secrets"]))
    assert floor.index(head(uris["no-secrets"])) < floor.index(head(uris["terse"]))
    assert any(head(uris[name]) in floor for name in ("make-ship", "canary", "script-fact"))
    assert head(uris["old-goal"]) in layers_of(bundle)["background"]


def test_recall_hits_go_to_the_foreground(
    fixed_cx: cg.Cortex, fixed: tuple[Path, dict[str, cg.MemoryURI]]
) -> None:
    """With a query and no channel, the foreground holds only recall hits (and the code
    attached to them), in recall order, and a hit the floor does not hold is there."""
    _, uris = fixed
    bundle = context(fixed_cx, query=SCRIPT.QUERY, budget_tokens=5000, now=SCRIPT.NOW)
    hits = fixed_cx.recall(SCRIPT.QUERY, k=caps_for(5000)["hits"], now=SCRIPT.NOW)
    recalled = [head(hit.uri) for hit in hits]
    recalled += [head(record.uri) for hit in hits for record in hit.attached]
    foreground = layers_of(bundle)["foreground"]
    assert foreground
    assert set(foreground) <= set(recalled)
    assert head(uris["retry"]) in foreground
    ranks = [recalled.index(uri) for uri in foreground if uri in recalled[: len(hits)]]
    assert ranks == sorted(ranks)


def test_channel_events_fill_the_foreground_without_a_query(
    fixed_cx: cg.Cortex, fixed: tuple[Path, dict[str, cg.MemoryURI]]
) -> None:
    """Without a query, the foreground is the channel's Events, newest first."""
    _, uris = fixed
    bundle = context(fixed_cx, budget_tokens=2000, channel="slack", now=SCRIPT.NOW)
    expected = [head(uris[f"event-{i}"]) for i in (3, 2, 0)]
    assert layers_of(bundle)["foreground"] == expected
    other = context(fixed_cx, budget_tokens=2000, channel="cli", now=SCRIPT.NOW)
    assert layers_of(other)["foreground"] == [head(uris[f"event-{i}"]) for i in (4, 1)]
    none = context(fixed_cx, budget_tokens=2000, channel="nowhere", now=SCRIPT.NOW)
    assert layers_of(none)["foreground"] == []


def test_channel_events_follow_the_hits_with_a_query(
    fixed_cx: cg.Cortex, fixed: tuple[Path, dict[str, cg.MemoryURI]]
) -> None:
    """With a query and a channel, the foreground is the recall hits the floor does not
    hold, in recall order, then the channel's newest Events that recall did not find."""
    _, uris = fixed
    query = "postgres replica"
    bundle = context(fixed_cx, query=query, budget_tokens=5000, channel="slack", now=SCRIPT.NOW)
    hits = fixed_cx.recall(query, k=caps_for(5000)["hits"], now=SCRIPT.NOW)
    recalled = []
    for hit in hits:
        if hit.record.memory.type_name not in ("attest", "learn_weights"):
            recalled.append(head(hit.uri))
            recalled.extend(head(record.uri) for record in hit.attached)
    found = layers_of(bundle)
    events = [head(uris[f"event-{i}"]) for i in (3, 2, 0)]
    expected = [uri for uri in dict.fromkeys(recalled) if uri not in found["floor"]]
    expected += [uri for uri in events if uri not in expected]
    assert found["foreground"] == expected
    assert set(events) <= set(found["foreground"])


def test_tombstoned_and_execution_memories_never_appear(
    fixed_cx: cg.Cortex, fixed: tuple[Path, dict[str, cg.MemoryURI]]
) -> None:
    """A tombstoned Fact never appears, not even for a query that names it; nor do the
    Attest and LearnWeights that ``attest`` wrote."""
    _, uris = fixed
    for query in (None, "api deploy token old wiki", "deploy went fine"):
        bundle = context(fixed_cx, query=query, budget_tokens=5000, now=SCRIPT.NOW)
        shown = {head(uri) for uri, _, _ in bundle.items}
        assert head(uris["gone"]) not in shown
        types = {fixed_cx.resolve(uri).memory.type_name for uri, _, _ in bundle.items}
        assert not types & {"attest", "learn_weights"}
        assert "old wiki" not in bundle.text


def test_items_are_head_uris_of_what_was_rendered(fixed_cx: cg.Cortex) -> None:
    """Each item is a ``MemoryURI`` pinned to the head version, and the bundle is the same
    when taken twice."""
    first = context(fixed_cx, query=SCRIPT.QUERY, budget_tokens=600, now=SCRIPT.NOW)
    for uri, _, form in first.items:
        assert isinstance(uri, cg.MemoryURI)
        assert uri.version == fixed_cx.resolve(uri.head).version
        assert form in cg.FORMS
    assert context(fixed_cx, query=SCRIPT.QUERY, budget_tokens=600, now=SCRIPT.NOW) == first


# ---------------------------------------------------------------------------
# per-type budgets and redistribution


def test_constraints_cannot_starve_preferences(cx: cg.Cortex) -> None:
    """Many long Constraints rank before the Preferences in the floor, yet the
    Preferences' type share keeps them in at a moderate budget."""
    long = " ".join(["the service must validate every request before it runs"] * 3)
    for i in range(16):
        cx.write(cg.Constraint(text=f"{long} ({i})", priority=10), at=T0 + i)
    prefs = [
        cx.write(cg.Preference(text=f"Prefers style {i}.", priority=1), at=T0 + 100 + i)
        for i in range(2)
    ]
    bundle = context(cx, budget_tokens=400, now=T0 + 1000)
    floor = layers_of(bundle)["floor"]
    assert all(head(uri) in floor for uri in prefs)
    assert sum(1 for uri in floor if uri not in map(head, prefs)) < 16


def test_unused_foreground_share_flows_to_the_background(cx: cg.Cortex) -> None:
    """Without a query or channel the foreground is empty, and the background uses more
    than its own 15 % share of the budget."""
    for i in range(60):
        cx.write(
            cg.Pattern(text=f"Pattern number {i} about caching requests.", priority=3), at=T0 + i
        )
    bundle = context(cx, budget_tokens=1000, now=T0 + 1000)
    assert layers_of(bundle)["foreground"] == []
    background = bundle.text[bundle.text.index(SECTION_HEADERS["background"]) :]
    assert estimate_tokens(background) > 150


# ---------------------------------------------------------------------------
# arguments


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"budget_tokens": -1}, "budget_tokens"),
        ({"budget_tokens": True}, "budget_tokens"),
        ({"budget_tokens": 10.0}, "budget_tokens"),
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": 5}, "query"),
        ({"query": "a\ud800"}, "query"),
        ({"channel": ""}, "channel"),
        ({"channel": b"chat"}, "channel"),
        ({"channel": "x" * 1025}, "channel"),
        ({"now": -1}, "now"),
        ({"now": True}, "now"),
        ({"now": "2024"}, "now"),
        ({"estimator": "len"}, "estimator"),
    ],
)
def test_bad_arguments(cx: cg.Cortex, kwargs: dict[str, Any], field: str) -> None:
    """Bad arguments raise ValidationError naming the argument."""
    args = {"budget_tokens": 100, **kwargs}
    with pytest.raises(ValidationError) as caught:
        context(cx, **args)
    assert caught.value.field == field


def test_context_inside_a_batch_raises(cx: cg.Cortex) -> None:
    """Like ``find``, ``context`` refuses to run inside an open batch."""
    with cx.batch() as b:
        b.write(cg.Fact(text="x"), at=T0)
        with pytest.raises(CortexError, match="outside the batch"):
            context(cx, budget_tokens=100, now=T0)


def test_a_bad_estimator_result_is_refused(cx: cg.Cortex) -> None:
    """An estimator that returns a non-integer is refused, naming ``estimator``."""
    cx.write(cg.Fact(text="hello"), at=T0)
    with pytest.raises(ValidationError) as caught:
        context(cx, budget_tokens=100, now=T0, estimator=lambda text: 1.5)
    assert caught.value.field == "estimator"


# ---------------------------------------------------------------------------
# bytes


def _golden_text(bundle: ContextBundle) -> str:
    lines = [bundle.text, "---"]
    lines += [f"{layer} {form} {uri}" for uri, layer, form in bundle.items]
    lines.append(f"tokens {bundle.tokens} digest {bundle.digest}")
    return "\n".join(lines) + "\n"


def test_golden(fixed: tuple[Path, dict[str, cg.MemoryURI]]) -> None:
    """Each case of the fixed store packs to exactly its golden file."""
    root, _ = fixed
    found = SCRIPT.bundles(root)
    assert sorted(found) == sorted(SCRIPT.CASES)
    regenerated = []
    for name, bundle in found.items():
        assert bundle.tokens <= SCRIPT.CASES[name][1]
        try:
            check_golden(GOLDEN / f"{name}.txt", _golden_text(bundle).encode("utf-8"))
        except pytest.fail.Exception:  # regenerating: write every case, then fail once
            regenerated.append(name)
    if regenerated:
        pytest.fail(f"regenerated {', '.join(sorted(regenerated))} in {GOLDEN.name}/; review"
                    " the diff and rerun", pytrace=False)


@pytest.mark.parametrize("name", sorted(SCRIPT.CASES))
def test_golden_files_follow_the_documented_rules(
    fixed: tuple[Path, dict[str, cg.MemoryURI]], fixed_cx: cg.Cortex, name: str,
) -> None:
    """A check of each golden file that does not come from the code that wrote it, by
    the rules of docs/context.md: the digest is the BLAKE3-256 of the text and the tokens
    its estimate, within the case's budget; items are in layer order, each memory once,
    each section's header present exactly when its layer has items; each item is the
    head of an active, agent-facing memory (never an Attest, LearnWeights or tombstoned
    one) rendered in its form, one ``- `` line each in the background; the floor holds
    only pinned memories, active Goals, Constraints, Preferences and Facts."""
    raw = (GOLDEN / f"{name}.txt").read_text(encoding="utf-8")
    text, rest = raw.split("\n---\n")
    *item_lines, summary = rest.rstrip("\n").split("\n")
    items = [line.split(" ") for line in item_lines]
    _, tokens, _, digest = summary.split(" ")
    assert digest == blake3.blake3(text.encode("utf-8")).hexdigest()
    assert int(tokens) == estimate_tokens(text) <= SCRIPT.CASES[name][1]
    layers = [layer for layer, _, _ in items]
    assert layers == sorted(layers, key=LAYERS.index)
    assert len({uri for _, _, uri in items}) == len(items)
    for layer, header in (("floor", "## Always"), ("foreground", "## Relevant now"),
                          ("background", "## Also known")):
        assert (header in text.split("\n")) == (layer in layers), (layer, header)
    rest_of_text = text
    for layer, form, uri in items:
        record = fixed_cx.resolve(uri)
        memory = record.memory
        assert record.status == "active" and record.version == record.head, uri
        assert memory.type_name not in ("attest", "learn_weights"), uri
        shown = render(record, form)
        if layer == "background":
            assert form == "short"
            shown = "- " + shown
        assert shown in rest_of_text, uri
        rest_of_text = rest_of_text[rest_of_text.index(shown) + len(shown):]
        if layer == "floor":
            assert memory.pinned or memory.type_name in ("constraint", "preference", "fact") or (
                memory.type_name == "goal" and memory.status == "active"), uri


def test_a_hand_written_bundle(cx: cg.Cortex) -> None:
    """A small store's bundle, written out by hand from docs/context.md and
    docs/forms.md: without a query or channel there is no foreground; the floor holds the
    Constraint, the Preference and the Facts (by salience: the higher priority first), in
    medium form; the rest (an achieved Goal, a Pattern) are background lines by salience;
    an attestation and a tombstoned Fact are never chosen. Tokens are the estimate of
    the text and the digest its BLAKE3-256."""
    cx.write(cg.Constraint(text="Never deploy on Fridays."), at=T0)
    cx.write(cg.Preference(text="Answers terse, code first."), at=T0)
    ship = cx.write(cg.Fact(text="Deploys run through make ship.", priority=8), at=T0)
    cx.write(cg.Fact(text="Lunch is at noon.", priority=6), at=T0)
    cx.write(cg.Goal(text="Ship v1.", status="achieved", priority=9), at=T0)
    cx.write(cg.Pattern(text="Retry flaky tests once.", priority=2), at=T0)
    gone = cx.write(cg.Fact(text="Deploys run from Jenkins.", priority=10), at=T0)
    cx.tombstone(gone, at=T0)
    cx.attest([ship], outcome="success", text="Shipped.", at=T0)
    bundle = context(cx, budget_tokens=2000, now=T0)
    expected = (
        "## Always\n"
        "[constraint] Never deploy on Fridays.\nconfidence 1.00 · priority 5\n\n"
        "[preference] Answers terse, code first.\nconfidence 1.00 · priority 5\n\n"
        "[fact] Deploys run through make ship.\nconfidence 1.00 · priority 8\n\n"
        "[fact] Lunch is at noon.\nconfidence 1.00 · priority 6\n\n"
        "## Also known\n"
        "- [goal:achieved] Ship v1.\n"
        "- [pattern] Retry flaky tests once."
    )
    assert bundle.text == expected
    assert [(layer, form) for _, layer, form in bundle.items] == [
        ("floor", "medium")] * 4 + [("background", "short")] * 2
    assert bundle.tokens == estimate_tokens(expected)
    assert bundle.digest == blake3.blake3(expected.encode("utf-8")).hexdigest()


@pytest.mark.slow
def test_same_digest_in_other_processes(fixed: tuple[Path, dict[str, cg.MemoryURI]]) -> None:
    """Two subprocesses with different PYTHONHASHSEED take the bundles of the same store
    to the same digests, tokens and items as this process."""
    root, _ = fixed
    expected = {name: SCRIPT.bundle_json(b) for name, b in SCRIPT.bundles(root).items()}
    expected = json.loads(json.dumps(expected, sort_keys=True))
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, str(SCRIPT_PATH), str(root)], env=env, capture_output=True,
            text=True, encoding="utf-8", timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == expected
