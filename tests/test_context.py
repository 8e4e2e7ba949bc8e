"""Context packing (``cortexgraph.core.packing``): layers, budgets, redistribution, bytes.

Golden files pin the exact text: ``fixtures/context/budget-<N>.txt`` holds the packed
context of the fixed items of ``tests/scripts/context_script.py`` at budget N, followed by
one newline. After an intended change, regenerate them (that run fails, saying what it
rewrote), review every diff by eye and run again::

    CORTEXGRAPH_REGEN_GOLDEN=1 .venv/bin/python -m pytest tests/test_context.py -k golden

Besides the golden bytes, ``test_golden_files_follow_the_documented_layout`` checks each
file against the layout docs/context.md describes, and the hand-computed cases use an
estimator that counts the letter ``x``, so that a record's cost is the number of x in its
summary (short form) or summary and text (medium form), and headers and separators are free.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import blake3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortexgraph.core.forms import FORMS, estimate_tokens, render
from cortexgraph.core.hashing import hash_function
from cortexgraph.core.packing import (
    LAYERS,
    ContextItem,
    PackedContext,
    pack_context,
    share_out,
)
from cortexgraph.core.state import Record
from cortexgraph.core.taxonomy import Constraint, Fact, Goal, Memory
from cortexgraph.core.uri import MemoryURI
from cortexgraph.errors import ValidationError
from golden import check_golden
from strategies import memories

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "fixtures" / "context"
SCRIPT_PATH = Path(__file__).parent / "scripts" / "context_script.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("context_script", SCRIPT_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _load_script()


def record(n: int, memory: Memory, status: str = "active") -> Record:
    uri = MemoryURI("agent", "default", n.to_bytes(16, "big"), 1)
    return Record(uri, memory, 1, n, 1_700_000_000_000, 1, 1, status, 1_700_000_000_000)


def item(n: int, memory: Memory, layer: str, rank: int, **kw: object) -> ContextItem:
    rec = record(n, memory)
    return ContextItem(
        uri=str(rec.uri), type_name=memory.type_name, layer=layer, rank=rank, record=rec, **kw
    )


def xs(memory_type: type[Memory], short: int, medium: int) -> Memory:
    """A memory whose short form has ``short`` x and medium form ``medium`` x."""
    return memory_type(text="x" * (medium - short), summary="x" * short)


def count_x(text: str) -> int:
    return text.count("x")


def kept_order(i: ContextItem) -> tuple[int, int, str, int]:
    """Which of several items with one URI is kept: the smallest of these."""
    return (LAYERS.index(i.layer), i.rank, i.uri, -FORMS.index(i.preferred_form))


def layout(packed: PackedContext) -> list[tuple[int, str, str]]:
    """``(n, layer, form)`` per item: ``n`` is the record number of ``item``."""
    return [
        (int(uri.split("/")[-1].split("@")[0], 16), layer, form)
        for uri, layer, form in packed.items
    ]


# ---------------------------------------------------------------------------
# Hand-computed budgets


def test_share_out_hand_computed() -> None:
    """Water-filling: 100 over weights 300/250/200 is 40/33/27; the first needs only 10,
    so 90 is shared again as 50/40; the third is then covered; the second gets the rest."""
    assert share_out(100, [300, 250, 200], [10, 80, 40]) == [10, 50, 40]
    assert share_out(100, [1, 1, 1], [0, 0, 0]) == [0, 0, 0]
    assert share_out(7, [1, 1, 1], [9, 9, 9]) == [3, 2, 2]  # the spare unit to the lower index
    assert share_out(10, [0, 0], [20, 20]) == [5, 5]  # all weights 0: equal


@given(
    total=st.integers(0, 500),
    pairs=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 200)), max_size=6),
)
def test_share_out_properties(total: int, pairs: list[tuple[int, int]]) -> None:
    """Allotments never exceed demands and sum to min(total, sum of demands)."""
    weights = [w for w, _ in pairs]
    demands = [d for _, d in pairs]
    alloc = share_out(total, weights, demands)
    assert all(0 <= a <= d for a, d in zip(alloc, demands, strict=True))
    assert sum(alloc) == min(total, sum(demands))


def test_type_share_unused_flows_to_the_others() -> None:
    """Floor of 50 with equal shares for constraint and goal: the constraint needs 10 of
    its 25, so goals get 40: the first goal in medium (30), the second falls back to short
    (5); 45 used."""
    items = [
        item(1, xs(Constraint, 2, 10), "floor", 0),
        item(2, xs(Goal, 5, 30), "floor", 1),
        item(3, xs(Goal, 5, 30), "floor", 2),
    ]
    packed = pack_context(items, 50, type_shares={"constraint": 1, "goal": 1}, estimator=count_x)
    assert layout(packed) == [(1, "floor", "medium"), (2, "floor", "medium"), (3, "floor", "short")]
    assert packed.tokens == 45


def test_type_share_caps_a_type_that_wants_more() -> None:
    """Without redistribution room (both types want 60 of a 50 floor) each type keeps to
    its share of 25: every item falls back to short; the slack (35) is offered to
    unplaced items only, so nothing more is added."""
    items = [
        item(1, xs(Constraint, 5, 30), "floor", 0),
        item(2, xs(Constraint, 5, 30), "floor", 1),
        item(3, xs(Goal, 5, 30), "floor", 2),
        item(4, xs(Goal, 5, 30), "floor", 3),
    ]
    packed = pack_context(items, 50, type_shares={"constraint": 1, "goal": 1}, estimator=count_x)
    assert [form for _, _, form in layout(packed)] == ["short"] * 4
    assert packed.tokens == 20


def test_a_type_without_share_gets_only_the_slack() -> None:
    """A type left out of ``type_shares`` gets nothing in the first pass; the slack the
    others leave (50 - 35 = 15) takes its item in rank order."""
    items = [
        item(1, xs(Constraint, 2, 10), "floor", 0),
        item(2, xs(Goal, 5, 30), "floor", 1),
        item(3, xs(Goal, 5, 30), "floor", 2),
    ]
    packed = pack_context(items, 50, type_shares={"goal": 1}, estimator=count_x)
    assert layout(packed) == [(1, "floor", "medium"), (2, "floor", "medium"), (3, "floor", "short")]
    packed = pack_context(items, 44, type_shares={"goal": 1}, estimator=count_x)
    # goals get all 44: 30 + 5 = 35 used; the slack 9 cannot take the constraint's 10 medium
    assert layout(packed) == [(1, "floor", "short"), (2, "floor", "medium"), (3, "floor", "short")]


def test_layer_budget_flows_on() -> None:
    """Equal layer shares of 60 (20 each): floor needs 10, background 5, so the
    foreground gets 45: one medium (30), one short (5); its 10 unused flow to the
    background."""
    items = [
        item(1, xs(Constraint, 2, 10), "floor", 0),
        item(2, xs(Fact, 5, 30), "foreground", 0),
        item(3, xs(Fact, 5, 30), "foreground", 1),
        item(4, xs(Fact, 5, 30), "background", 0),
        item(5, xs(Fact, 5, 30), "background", 1),
    ]
    shares = {"floor": 1, "foreground": 1, "background": 1}
    packed = pack_context(items, 60, layer_shares=shares, estimator=count_x)
    assert layout(packed) == [
        (1, "floor", "medium"),
        (2, "foreground", "medium"),
        (3, "foreground", "short"),
        (4, "background", "short"),
        (5, "background", "short"),
    ]
    assert packed.tokens == 55


def test_exact_text_format() -> None:
    """Sections joined by a blank line; blocks separated by a blank line; background one
    '- ' line each; no trailing newline."""
    items = [
        item(1, Constraint(text="No Friday deploys."), "floor", 0),
        item(2, Goal(text="Ship v2."), "floor", 1),
        item(3, Fact(text="Deploys use make ship."), "foreground", 0),
        item(4, Fact(text="Staging is eu-west-1."), "background", 0),
        item(5, Fact(text="Alice owns billing."), "background", 1),
    ]
    packed = pack_context(items, 10_000)
    r = [render(i.record, "medium") for i in items[:3]]
    s = [render(i.record, "short") for i in items[3:]]
    expected = (
        f"## Always\n{r[0]}\n\n{r[1]}\n\n## Relevant now\n{r[2]}\n\n"
        f"## Also known\n- {s[0]}\n- {s[1]}"
    )
    assert packed.text == expected
    assert packed.tokens == estimate_tokens(expected)
    assert packed.digest == hash_function("blake3")(expected.encode("utf-8")).hex()


def test_empty_and_zero_budget() -> None:
    """No items or no budget: the empty text, 0 tokens, the digest of no bytes."""
    items = [item(1, Fact(text="a"), "floor", 0)]
    for packed in (pack_context([], 100), pack_context(items, 0)):
        assert (packed.text, packed.items, packed.tokens) == ("", (), 0)
        assert packed.digest == hash_function("blake3")(b"").hex()


def test_preferred_full_form_falls_back() -> None:
    """An item may ask for the full form; it falls back to medium, then short."""
    memory = Fact(text="The build cache lives in /var/cache/build.")
    wanted = item(1, memory, "foreground", 0, form="full")
    full, medium = (estimate_tokens("\n\n" + render(wanted.record, f)) for f in ("full", "medium"))
    header = estimate_tokens("\n\n## Relevant now")
    assert pack_context([wanted], header + full).items[0][2] == "full"
    assert pack_context([wanted], header + full - 1).items[0][2] == "medium"
    assert pack_context([wanted], header + medium - 1).items[0][2] == "short"


def test_duplicates_keep_the_earliest_layer_and_rank() -> None:
    """The same URI in two layers appears once, in the earlier layer."""
    rec = record(1, Fact(text="a"))
    twice = [
        ContextItem(uri=str(rec.uri), type_name="fact", layer="background", rank=0, record=rec),
        ContextItem(uri=str(rec.uri), type_name="fact", layer="floor", rank=5, record=rec),
    ]
    assert pack_context(twice, 1000).items == ((str(rec.uri), "floor", "medium"),)


def test_inactive_records_are_refused() -> None:
    """Archived (or any non-active) records never enter a context."""
    rec = record(1, Fact(text="a"), status="archived")
    bad = ContextItem(uri=str(rec.uri), type_name="fact", layer="floor", rank=0, record=rec)
    with pytest.raises(ValidationError) as info:
        pack_context([bad], 100)
    assert info.value.field == "items"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"budget_tokens": -1}, "budget_tokens"),
        ({"budget_tokens": 1.5}, "budget_tokens"),
        ({"type_shares": {"note": 1}}, "type_shares"),
        ({"type_shares": {"fact": -1}}, "type_shares"),
        ({"layer_shares": {"floor": 0.5}}, "layer_shares"),
        ({"headers": {"floor": "x"}}, "headers"),
        ({"estimator": lambda t: -1}, "estimator"),
        ({"estimator": lambda t: 1.0}, "estimator"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], field: str) -> None:
    """Bad arguments fail with ValidationError naming them."""
    call: dict[str, object] = {"budget_tokens": 100, **kwargs}
    with pytest.raises(ValidationError) as info:
        pack_context([item(1, Fact(text="a"), "floor", 0)], **call)  # type: ignore[arg-type]
    assert info.value.field == field


def test_bad_items() -> None:
    """An item's type must match its record; background items are short."""
    rec = record(1, Fact(text="a"))
    with pytest.raises(ValidationError):
        ContextItem(uri="u", type_name="goal", layer="floor", rank=0, record=rec)
    with pytest.raises(ValidationError):
        ContextItem(uri="u", type_name="fact", layer="background", rank=0, record=rec, form="full")
    with pytest.raises(ValidationError):
        ContextItem(uri="u", type_name="fact", layer="attic", rank=0, record=rec)


# ---------------------------------------------------------------------------
# Properties


ESTIMATORS: list[Callable[[str], int]] = [
    estimate_tokens,
    len,
    lambda t: len(t) // 4,  # floors: not subadditive
    lambda t: len(t.split()),
    lambda t: 3 if t else 0,  # constant: far from subadditive
    lambda t: 7 + t.count("\n") * 5,  # costs something even for ""
    lambda t: (len(t) * 7919) % 13,  # not even monotone
]


@st.composite
def item_lists(draw: st.DrawFn) -> list[ContextItem]:
    count = draw(st.integers(0, 12))
    out = []
    records: dict[int, Record] = {}
    for n in range(1, count + 1):
        n_uri = draw(st.integers(1, n))  # sometimes the same memory again
        if n_uri not in records:
            records[n_uri] = record(n_uri, draw(memories(text_size=40)))
        rec = records[n_uri]
        memory = rec.memory
        layer = draw(st.sampled_from(LAYERS))
        form = draw(
            st.sampled_from(
                [None, "short"] if layer == "background" else [None, *("short", "medium", "full")]
            )
        )
        out.append(
            ContextItem(uri=str(rec.uri), type_name=memory.type_name, layer=layer,
                        rank=draw(st.integers(-3, 3)), record=rec, form=form)
        )  # fmt: skip
    return out


@given(
    items=item_lists(),
    budget=st.integers(0, 400),
    estimator=st.sampled_from(ESTIMATORS),
    shares=st.one_of(
        st.none(), st.dictionaries(st.sampled_from(["fact", "goal", "event"]), st.integers(0, 5))
    ),
)
def test_never_exceeds_the_budget_and_keeps_order(
    items: list[ContextItem],
    budget: int,
    estimator: Callable[[str], int],
    shares: dict[str, int] | None,
) -> None:
    """For any items, budget, estimator and shares: the text costs at most the budget
    (as the estimator counts it), items appear at most once, layers appear in order and
    ranks ascend within a layer, and the reported items are exactly those in the text."""
    packed = pack_context(items, budget, estimator=estimator, type_shares=shares)
    assert packed.tokens <= budget
    assert packed.tokens == (estimator(packed.text) if packed.text else 0)
    uris = [uri for uri, _, _ in packed.items]
    assert len(uris) == len(set(uris))
    by_uri = {}
    for i in sorted(items, key=kept_order, reverse=True):
        by_uri[i.uri] = i  # the kept duplicate: earliest layer, lowest rank
    keys = [(LAYERS.index(layer), by_uri[uri].rank, uri) for uri, layer, _ in packed.items]
    assert keys == sorted(keys)
    assert all(by_uri[uri].layer == layer for uri, layer, _ in packed.items)
    for uri, layer, form in packed.items:
        text = render(by_uri[uri].record, form)
        assert (("- " + text) if layer == "background" else text) in packed.text
    assert (packed.text == "") == (packed.items == ())


@given(items=item_lists())
def test_a_budget_that_covers_every_demand_shows_everything(items: list[ContextItem]) -> None:
    """With the default estimator, a budget of every header plus every item in its
    preferred form holds every distinct item in its preferred form."""
    kept = {}
    for i in sorted(items, key=kept_order, reverse=True):
        kept[i.uri] = i
    sep = {"floor": "\n\n", "foreground": "\n\n", "background": "\n- "}
    demand = sum(
        estimate_tokens(sep[i.layer] + render(i.record, i.preferred_form)) for i in kept.values()
    )
    headers = ("## Always", "## Relevant now", "## Also known")
    demand += sum(estimate_tokens("\n\n" + h) for h in headers)
    packed = pack_context(items, demand)
    assert sorted(packed.items) == sorted((i.uri, i.layer, i.preferred_form) for i in kept.values())


@given(items=item_lists(), budget=st.integers(0, 400))
def test_input_order_does_not_matter(items: list[ContextItem], budget: int) -> None:
    """The packed bytes depend on the items, not the order they are passed in."""
    assert pack_context(items, budget) == pack_context(list(reversed(items)), budget)


# ---------------------------------------------------------------------------
# Golden files and other processes


@pytest.mark.parametrize("budget", SCRIPT.BUDGETS)
def test_golden_file(budget: int) -> None:
    """The packed context of the fixed items equals its golden file byte for byte."""
    packed = pack_context(SCRIPT.golden_items(), budget)
    assert packed.tokens <= budget
    check_golden(GOLDEN / f"budget-{budget}.txt", (packed.text + "\n").encode("utf-8"))


@pytest.mark.parametrize("budget", SCRIPT.BUDGETS)
def test_golden_files_follow_the_documented_layout(budget: int) -> None:
    """A check of each golden file that does not come from the packer, by the rules of
    docs/context.md: the file is the text and one newline; the non-empty sections come in
    layer order, each its header then its items, joined by one blank line; floor and
    foreground items are the short or medium form of that layer's items in rank order,
    background items one ``- <short form>`` line each in rank order; the estimate of the
    text is within the budget, and the digest is the BLAKE3-256 of the text."""
    raw = (GOLDEN / f"budget-{budget}.txt").read_text(encoding="utf-8")
    assert raw.endswith("\n") and not raw.endswith("\n\n")
    text = raw[:-1]
    headers = {"floor": "## Always", "foreground": "## Relevant now",
               "background": "## Also known"}
    sections = text.split("\n\n## ")
    names = [section.split("\n", 1)[0].removeprefix("## ") for section in sections]
    order = [headers[layer][3:] for layer in LAYERS]
    assert names == [name for name in order if name in names]
    items = SCRIPT.golden_items()
    for section, name in zip(sections, names, strict=True):
        layer = next(layer for layer, header in headers.items() if header[3:] == name)
        candidates = sorted((i for i in items if i.layer == layer), key=lambda i: i.rank)
        body = section.split("\n", 1)[1]
        if layer == "background":
            shown = [line.removeprefix("- ") for line in body.split("\n")]
            assert all(line.startswith("- ") for line in body.split("\n"))
            forms = [[render(i.record, "short")] for i in candidates]
        else:
            shown = body.split("\n\n")
            forms = [[render(i.record, f) for f in ("medium", "short")] for i in candidates]
        # what is shown is a subsequence of the candidates, in rank order
        position = 0
        for block in shown:
            while position < len(forms) and block not in forms[position]:
                position += 1
            assert position < len(forms), f"{block!r} is no {layer} item's form, in rank order"
            position += 1
    assert estimate_tokens(text) <= budget
    packed = pack_context(items, budget)
    assert packed.digest == blake3.blake3(text.encode("utf-8")).hexdigest()


def test_golden_budgets_exercise_the_rules() -> None:
    """The three budgets show a tight floor with short fallbacks, a middle ground, and
    everything at its preferred form."""
    small, middle, large = (pack_context(SCRIPT.golden_items(), b) for b in SCRIPT.BUDGETS)
    assert {form for _, _, form in small.items} == {"short"}
    assert {layer for _, layer, _ in middle.items} >= {"floor", "foreground"}
    assert len(large.items) == len(SCRIPT.golden_items())
    assert all(
        form == ("short" if layer == "background" else "medium") for _, layer, form in large.items
    )


@pytest.mark.slow
def test_same_digest_in_other_processes() -> None:
    """Two subprocesses with different PYTHONHASHSEED pack the fixed items to the same
    digests, tokens and items as this process."""
    expected = json.loads(json.dumps(SCRIPT.packed(), sort_keys=True))
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, str(SCRIPT_PATH)], env=env, capture_output=True, text=True,
            encoding="utf-8", timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == expected
