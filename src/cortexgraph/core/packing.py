"""Context packing: candidates in three layers, packed under a token budget.

The shell picks the candidates and ranks them (``Cortex.context``); this module only
packs: which of them fit, in which form, and the exact text. It is pure: the same items,
budget and options give the same bytes on any machine and in any process (no set
iteration, no locale, no hash seed), so a prompt cache keyed on the text hits.

Layers, in order (``docs/context.md``)::

    floor       "## Always"        medium form    pinned memories, active Goals, Constraints,
                                                  Preferences, the hottest Facts
    foreground  "## Relevant now"  medium form    recall hits, or a channel's recent Events
    background  "## Also known"    short form     one "- " line for the best of the rest
    (archived memories never appear: an item whose record is not active is refused)

The text, exactly: the non-empty sections joined by one blank line; a section is its
header line, then its items. Floor and foreground items are separated by a blank line;
background items are one ``- <short form>`` line each::

    ## Always
    <medium form>

    <medium form>

    ## Relevant now
    <medium form>

    ## Also known
    - <short form>
    - <short form>

No trailing newline; no budget, no items: the empty string (0 tokens).

Budgets (all in tokens, as the estimator counts them):

1. Each layer's *demand* is what all its items cost in their preferred form, plus its
   header. The budget is shared out over the layers in proportion to
   :data:`LAYER_SHARES` (40 / 45 / 15 %), but a layer never gets more than it demands:
   what it does not need is shared out again over the others ("water-filling", see
   :func:`share_out`).
2. The floor's allotment is shared out over its memory types the same way, by
   ``type_shares`` (default :data:`DEFAULT_TYPE_SHARES`). Each type packs its items in
   rank order into its own allotment; then whatever the types left unused is offered to
   the floor items not yet placed, in rank order. Foreground and background have no type
   shares: their rank (relevance) decides.
3. The layers pack in order, floor -> foreground -> background, and what a layer leaves
   unused flows on to the next.
4. Packing is first-fit in rank order: an item that does not fit in its form falls back to
   a cheaper one (full -> medium -> short); if even the short form does not fit it is
   left out and the next item is tried.
5. An item costs its rendered form with its separator; a section header costs
   ``"\\n\\n" + header``. With a subadditive estimator such as
   :func:`~cortexgraph.core.forms.estimate_tokens` the text costs at most the sum of its
   pieces; for any other estimator the whole text is measured at the end and the last
   items (background first, then foreground, then floor, each from its lowest rank) are
   dropped until it fits. The result never exceeds ``budget_tokens``.

Each memory appears at most once: duplicates (the same ``uri``) keep their earliest layer,
within it their lowest rank, and then the richer preferred form. See ``docs/context.md``
for worked examples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from ..errors import ValidationError
from .forms import FORMS, TokenEstimator, estimate_tokens, render
from .hashing import hash_function
from .state import Record
from .taxonomy import MEMORY_TYPES

__all__ = [
    "DEFAULT_FORMS",
    "DEFAULT_TYPE_SHARES",
    "LAYERS",
    "LAYER_SHARES",
    "SECTION_HEADERS",
    "ContextItem",
    "PackedContext",
    "pack_context",
    "share_out",
]

LAYERS: Final = ("floor", "foreground", "background")
"""The layers, in the order they are packed and appear in the text."""

DEFAULT_FORMS: Final[Mapping[str, str]] = {
    "floor": "medium",
    "foreground": "medium",
    "background": "short",
}
"""The form an item of each layer is shown in unless the item asks for another. The full
form is never chosen by default: its record metadata (seq, URIs, times) is noise in a
prompt; the shell may ask for it per item (e.g. an ArtifactRef whose code is wanted)."""

SECTION_HEADERS: Final[Mapping[str, str]] = {
    "floor": "## Always",
    "foreground": "## Relevant now",
    "background": "## Also known",
}
"""The header line of each layer's section."""

LAYER_SHARES: Final[Mapping[str, int]] = {
    "floor": 400_000,
    "foreground": 450_000,
    "background": 150_000,
}
"""Each layer's share of the budget (ppm) before redistribution."""

DEFAULT_TYPE_SHARES: Final[Mapping[str, int]] = {
    "goal": 200_000,
    "preference": 200_000,
    "constraint": 250_000,
    "fact": 150_000,
    "pattern": 80_000,
    "event": 50_000,
    "artifact_ref": 50_000,
    "attest": 10_000,
    "learn_weights": 10_000,
}
"""Each memory type's share of the floor (ppm, summing to 1,000,000) before
redistribution. Constraints first: breaking one is the costliest mistake."""

_TYPE_NAMES = tuple(t.type_name for t in MEMORY_TYPES)
_LINE = "- "
_BLOCK_SEP = "\n\n"
_CHEAPER = {"full": ("full", "medium", "short"), "medium": ("medium", "short"), "short": ("short",)}
_blake3 = hash_function("blake3")


# ---------------------------------------------------------------------------
# Records


def _check_layer(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not str or value not in LAYERS:
        raise ValidationError(
            f"must be one of {', '.join(LAYERS)}, not {value!r}", field=attribute.name
        )


def _check_str(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not str or not value:
        raise ValidationError(f"must be a non-empty string, not {value!r}", field=attribute.name)


def _check_rank(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not int:
        raise ValidationError(
            f"must be an integer, not {type(value).__name__}", field=attribute.name
        )


def _check_record(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not Record:
        raise ValidationError(f"must be a Record, not {type(value).__name__}", field=attribute.name)


@attrs.frozen(kw_only=True)
class ContextItem:
    """One candidate for a context bundle, chosen and ranked by the shell.

    Attributes:
        uri: the memory's URI as it should be reported (``PackedContext.items``); also the
            key duplicates are recognised by.
        type_name: the memory's type; must be ``record.memory.type_name``.
        layer: ``"floor"``, ``"foreground"`` or ``"background"``.
        rank: the order within its layer, lower first (ties: by ``uri``).
        record: the record to render; its status must be ``"active"``.
        form: the preferred form, or ``None`` for the layer's default
            (:data:`DEFAULT_FORMS`). Background items are always one short line.
    """

    uri: str = attrs.field(validator=_check_str)
    type_name: str = attrs.field(validator=_check_str)
    layer: str = attrs.field(validator=_check_layer)
    rank: int = attrs.field(validator=_check_rank)
    record: Record = attrs.field(validator=_check_record)
    form: str | None = attrs.field(default=None)

    def __attrs_post_init__(self) -> None:
        if self.type_name != self.record.memory.type_name:
            raise ValidationError(
                f"is {self.type_name!r} but the record holds a {self.record.memory.type_name}",
                field="type_name",
            )
        if self.form is not None and (type(self.form) is not str or self.form not in FORMS):
            raise ValidationError(f"must be one of {', '.join(FORMS)} or None", field="form")
        if self.layer == "background" and self.form not in (None, "short"):
            raise ValidationError("background items are shown in the short form", field="form")

    @property
    def preferred_form(self) -> str:
        """The form this item is shown in when it fits."""
        return self.form if self.form is not None else DEFAULT_FORMS[self.layer]


@attrs.frozen
class PackedContext:
    """A packed context: the text and what went into it.

    Attributes:
        text: the prompt text (format in the module docstring).
        items: ``(uri, layer, form)`` for every item in the text, in text order.
        tokens: ``estimator(text)``; 0 for the empty text. Never above the budget.
        digest: hex BLAKE3-256 of ``text`` in UTF-8.
    """

    text: str
    items: tuple[tuple[str, str, str], ...]
    tokens: int
    digest: str


# ---------------------------------------------------------------------------
# Sharing a budget out


def _apportion(weights: Sequence[int], total: int) -> list[int]:
    """``total`` split in proportion to ``weights`` (not all zero): floor division, then
    the units left over one each to the largest remainders, ties to the lower index."""
    whole = sum(weights)
    parts: list[int] = []
    remainders: list[int] = []
    for weight in weights:
        part, remainder = divmod(weight * total, whole)
        parts.append(part)
        remainders.append(remainder)
    left = total - sum(parts)
    for index in sorted(range(len(parts)), key=lambda i: (-remainders[i], i))[:left]:
        parts[index] += 1
    return parts


def share_out(total: int, weights: Sequence[int], demands: Sequence[int]) -> list[int]:
    """Share ``total`` over groups by ``weights``, never giving a group more than it
    demands ("water-filling").

    In rounds: the amount still free is split over the groups still wanting more, in
    proportion to their weights (exactly, by largest remainder, ties to the lower index;
    equally if all their weights are 0). Every group whose part covers its demand gets
    exactly its demand, and the rest of its part is shared out again in the next round.
    When no group is covered, each keeps its part and sharing ends. So a group gets at
    least its proportional share of ``total`` or all it demands, and the allotments sum
    to ``min(total, sum(demands))``.

    >>> share_out(100, [300, 250, 200], [10, 80, 40])  # 40/33/27: the first needs only 10
    [10, 50, 40]
    >>> share_out(10, [1, 0], [20, 20]), share_out(10, [1, 0], [4, 20])
    ([10, 0], [4, 6])

    Raises:
        ValidationError: a negative total, weight or demand, or lengths that differ.
    """
    if type(total) is not int or total < 0:
        raise ValidationError(f"must be an integer >= 0, not {total!r}", field="total")
    if len(weights) != len(demands):
        raise ValidationError("weights and demands differ in length", field="weights")
    for name, values in (("weights", weights), ("demands", demands)):
        if any(type(v) is not int or v < 0 for v in values):
            raise ValidationError("must be integers >= 0", field=name)
    alloc = [0] * len(demands)
    wanting = [i for i, demand in enumerate(demands) if demand > 0]
    free = total
    while wanting and free > 0:
        shares = [weights[i] for i in wanting]
        if not any(shares):
            shares = [1] * len(wanting)
        parts = _apportion(shares, free)
        covered = [i for i, part in zip(wanting, parts, strict=True) if part >= demands[i]]
        if not covered:
            for i, part in zip(wanting, parts, strict=True):
                alloc[i] += part
            break
        for i in covered:
            free -= demands[i] - alloc[i]
            alloc[i] = demands[i]
        wanting = [i for i in wanting if alloc[i] < demands[i]]
    return alloc


# ---------------------------------------------------------------------------
# Packing


#: Renderings of recently packed records and their costs under the default estimator,
#: by the record object: the contexts of one store pack mostly the same records call after
#: call (the floor and the background change slowly), and a record is immutable, so its
#: renderings and their costs are too; at 100,000 memories rendering and counting were a
#: fifth of a context call. Each entry holds its record, so the id is not reused while it
#: is cached; only records whose text is at most ``_MEMO_TEXT`` characters are kept, and
#: the cache is emptied when it holds ``_MEMO_MAX`` records, which bounds its memory.
_MEMO: dict[int, tuple[Record, dict[tuple[str, bool], tuple[str, int]]]] = {}
_MEMO_MAX = 2048
_MEMO_TEXT = 2048


def _memo_of(record: Record) -> dict[tuple[str, bool], tuple[str, int]] | None:
    """The cache entry of ``record`` (made if need be), or None for a long text."""
    entry = _MEMO.get(id(record))
    if entry is not None and entry[0] is record:
        return entry[1]
    if len(record.memory.text) > _MEMO_TEXT:
        return None
    if len(_MEMO) >= _MEMO_MAX:
        _MEMO.clear()
    memo: dict[tuple[str, bool], tuple[str, int]] = {}
    _MEMO[id(record)] = (record, memo)
    return memo


class _Entry:
    """An item with its renderings and costs, computed once per form (and shared with
    later packings of the same record, through ``_MEMO``, for the default estimator)."""

    __slots__ = ("_cost", "_memo", "_text", "item")

    def __init__(self, item: ContextItem) -> None:
        self.item = item
        self._text: dict[str, str] = {}
        self._cost: dict[str, int] = {}
        self._memo = _memo_of(item.record)

    def text(self, form: str) -> str:
        text = self._text.get(form)
        if text is None:
            memo = self._memo
            known = None if memo is None else memo.get((form, self.item.layer == "background"))
            text = known[0] if known is not None else render(self.item.record, form)
            self._text[form] = text
        return text

    def cost(self, form: str, count: Callable[[str], int]) -> int:
        cost = self._cost.get(form)
        if cost is None:
            background = self.item.layer == "background"
            memo = self._memo if count is _DEFAULT_COUNT else None
            known = None if memo is None else memo.get((form, background))
            if known is not None:
                cost = self._cost[form] = known[1]
                return cost
            rendered = self.text(form)
            piece = ("\n" + _LINE if background else _BLOCK_SEP) + rendered
            cost = self._cost[form] = count(piece)
            if memo is not None:
                memo[form, background] = (rendered, cost)
        return cost

    def fit(self, room: int, count: Callable[[str], int]) -> tuple[str, int] | None:
        """The first form (preferred, then cheaper) that costs at most ``room``."""
        for form in _CHEAPER[self.item.preferred_form]:
            cost = self.cost(form, count)
            if cost <= room:
                return form, cost
        return None


def _counter(estimator: TokenEstimator) -> Callable[[str], int]:
    def count(text: str) -> int:
        tokens = estimator(text)
        if type(tokens) is not int or tokens < 0:
            raise ValidationError(
                f"a token estimator must return an integer >= 0, not {tokens!r}",
                field="estimator",
            )
        return tokens

    return count


_DEFAULT_COUNT = _counter(estimate_tokens)


def _shares(
    value: Mapping[str, int] | None, names: Sequence[str], default: Mapping[str, int], field: str
) -> list[int]:
    if value is None:
        return [default[name] for name in names]
    if not isinstance(value, Mapping):
        raise ValidationError(f"must be a mapping, not {type(value).__name__}", field=field)
    for key, share in sorted(value.items(), key=lambda kv: str(kv[0])):
        if key not in names:
            raise ValidationError(f"unknown key {key!r}", field=field)
        if type(share) is not int or share < 0:
            raise ValidationError(f"{key}: must be an integer >= 0, not {share!r}", field=field)
    return [value.get(name, 0) for name in names]


def _headers(value: Mapping[str, str] | None) -> dict[str, str]:
    if value is None:
        return dict(SECTION_HEADERS)
    if not isinstance(value, Mapping) or sorted(value) != sorted(LAYERS):
        raise ValidationError(f"must map exactly {', '.join(LAYERS)}", field="headers")
    for layer in LAYERS:
        header = value[layer]
        if type(header) is not str or not header.strip() or len(header.splitlines()) != 1:
            raise ValidationError(f"{layer}: must be one non-blank line", field="headers")
        if header != header.rstrip("\n\r"):
            raise ValidationError(f"{layer}: must be one non-blank line", field="headers")
    return {layer: value[layer] for layer in LAYERS}


def _priority(item: ContextItem) -> tuple[int, int, str, int, int]:
    """Packing order: layer, rank, uri; for the same URI twice, the richer form wins."""
    return (
        LAYERS.index(item.layer),
        item.rank,
        item.uri,
        -FORMS.index(item.preferred_form),
        item.record.seq,
    )


def _entries(items: Iterable[ContextItem]) -> dict[str, list[_Entry]]:
    """Valid, deduplicated entries per layer, each layer in (rank, uri) order."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise ValidationError("must be an iterable of ContextItem", field="items")
    checked: list[ContextItem] = []
    for item in items:
        if type(item) is not ContextItem:
            raise ValidationError(
                f"must hold ContextItem, not {type(item).__name__}", field="items"
            )
        if item.record.status != "active":
            raise ValidationError(
                f"{item.uri} is {item.record.status}; only active memories enter a context",
                field="items",
            )
        checked.append(item)
    checked.sort(key=_priority)
    seen: set[str] = set()  # membership only; never iterated
    layers: dict[str, list[_Entry]] = {layer: [] for layer in LAYERS}
    for item in checked:
        if item.uri not in seen:
            seen.add(item.uri)
            layers[item.layer].append(_Entry(item))
    return layers


def _pack_layer(
    entries: list[_Entry],
    avail: int,
    header_cost: int,
    type_weights: Sequence[int] | None,
    count: Callable[[str], int],
) -> tuple[list[tuple[_Entry, str]], int]:
    """Place what fits of one layer in ``avail`` tokens: ``(placed, tokens used)``."""
    room = avail - header_cost
    if not entries or room < 0:
        return [], 0
    placed: dict[int, str] = {}  # index into entries -> form
    used = 0
    if type_weights is not None:
        groups = [[i for i, e in enumerate(entries) if e.item.type_name == t] for t in _TYPE_NAMES]
        demands = [
            sum(entries[i].cost(entries[i].item.preferred_form, count) for i in group)
            for group in groups
        ]
        for group, allotment in zip(groups, share_out(room, type_weights, demands), strict=True):
            for i in group:
                fit = entries[i].fit(allotment, count)
                if fit is not None:
                    placed[i], cost = fit
                    allotment -= cost
                    used += cost
    for i, entry in enumerate(entries):  # rank order; for the floor, the types' slack
        if i not in placed:
            fit = entry.fit(room - used, count)
            if fit is not None:
                placed[i], cost = fit
                used += cost
    if not placed:
        return [], 0
    return [(entries[i], placed[i]) for i in sorted(placed)], used + header_cost


def _compose(placed: Sequence[tuple[_Entry, str]], headers: Mapping[str, str]) -> str:
    sections: list[str] = []
    for layer in LAYERS:
        rendered = [entry.text(form) for entry, form in placed if entry.item.layer == layer]
        if not rendered:
            continue
        if layer == "background":
            body = "\n".join(_LINE + text for text in rendered)
        else:
            body = _BLOCK_SEP.join(rendered)
        sections.append(headers[layer] + "\n" + body)
    return _BLOCK_SEP.join(sections)


def pack_context(
    items: Iterable[ContextItem],
    budget_tokens: int,
    *,
    type_shares: Mapping[str, int] | None = None,
    layer_shares: Mapping[str, int] | None = None,
    headers: Mapping[str, str] | None = None,
    estimator: TokenEstimator = estimate_tokens,
) -> PackedContext:
    """Pack ranked candidates into at most ``budget_tokens`` tokens of prompt text.

    The rules (layers, shares, redistribution, fall-back forms, the exact text) are in the
    module docstring and ``docs/context.md``.

    Args:
        items: the candidates, in any order; each memory at most once is kept.
        budget_tokens: the most the text may cost, as ``estimator`` counts; >= 0.
        type_shares: the floor's share per type name, as non-negative weights (ppm by
            convention); a type left out gets only what the others leave. Default
            :data:`DEFAULT_TYPE_SHARES`.
        layer_shares: each layer's share, likewise. Default :data:`LAYER_SHARES`.
        headers: the header line of each layer's section. Default
            :data:`SECTION_HEADERS`.
        estimator: counts tokens; deterministic, returns an integer >= 0.

    Returns:
        A :class:`PackedContext` whose ``tokens`` never exceed ``budget_tokens``.

    Raises:
        ValidationError: a bad argument (naming it), an item whose record is not active
            (``items``), or an estimator result that is not an integer >= 0.
    """
    if type(budget_tokens) is not int or budget_tokens < 0:
        raise ValidationError(
            f"must be an integer >= 0, not {budget_tokens!r}", field="budget_tokens"
        )
    type_weights = _shares(type_shares, _TYPE_NAMES, DEFAULT_TYPE_SHARES, "type_shares")
    layer_weights = _shares(layer_shares, LAYERS, LAYER_SHARES, "layer_shares")
    header_text = _headers(headers)
    if not callable(estimator):
        raise ValidationError("must be callable", field="estimator")
    count = _DEFAULT_COUNT if estimator is estimate_tokens else _counter(estimator)
    layers = _entries(items)

    header_costs = {layer: count(_BLOCK_SEP + header_text[layer]) for layer in LAYERS}
    demands = [
        header_costs[layer] + sum(e.cost(e.item.preferred_form, count) for e in layers[layer])
        if layers[layer]
        else 0
        for layer in LAYERS
    ]
    allotments = share_out(budget_tokens, layer_weights, demands)
    carry = budget_tokens - sum(allotments)
    placed: list[tuple[_Entry, str]] = []
    for layer, allotment in zip(LAYERS, allotments, strict=True):
        avail = allotment + carry
        weights = type_weights if layer == "floor" else None
        chosen, used = _pack_layer(layers[layer], avail, header_costs[layer], weights, count)
        placed.extend(chosen)
        carry = avail - used

    text = _compose(placed, header_text)
    tokens = count(text) if text else 0
    while tokens > budget_tokens:  # only for estimators that are not subadditive
        placed.pop()
        text = _compose(placed, header_text)
        tokens = count(text) if text else 0
    return PackedContext(
        text=text,
        items=tuple((e.item.uri, e.item.layer, form) for e, form in placed),
        tokens=tokens,
        digest=_blake3(text.encode("utf-8")).hex(),
    )
