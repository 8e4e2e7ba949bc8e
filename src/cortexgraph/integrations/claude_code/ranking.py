"""The plugin's ranking profile and how the surface is composed from ranked lines (pure).

**The ranking profile** is the seed plugin's formula, kept as a named profile
(:data:`SEED_PROFILE`, ``"cortex-seed"``) beside the library's learned salience::

    rank = 0.50 x confidence (decayed by the category's half-life)
         + 0.20 x priority / 10
         + 0.15 x centrality            (in-degree over the store's highest)
         + 0.15 x log(access + 1) / log(max access + 1)
         + 0.10 if the memory was learned on the current git branch

Confidence decays as ``confidence x 0.5 ** (age / half-life)``, with the category's
half-life (:mod:`.categories`: architecture and decision stable, progress 7 days, ...),
doubled for a memory read more than 10 times or with centrality above 0.5, and none for a
pinned memory. A rank is an integer in parts per million, so that ties and order are exact.

**The surface** takes ranked lines (:class:`SurfaceLine`) and fits them into a window of
at most :data:`SURFACE_TOKENS` tokens (the seed's 300-500: the floor is reached whenever the
store holds that much), in two passes:

1. each category gets a share of the window proportional to its line budget (architecture
   25 of 220 lines -> about 57 tokens of 500) and takes its best lines within that share
   and its line budget;
2. what is left of the window goes to the best remaining lines of any category, within
   its line budget; a high-value line (rank at least :data:`HIGH_VALUE`) may go past its
   category's budget into the lines the other categories leave unused (the seed's
   "high-value memories may overflow into unused budget").

The same lines give the same bytes. Lines are grouped by category in the categories' order,
best first within each.

>>> lines = [SurfaceLine("decision", 800_000, "We chose Postgres over MySQL.", "a1"),
...          SurfaceLine("gotcha", 700_000, "Safari drops the cookie on redirect.", "b2")]
>>> print(compose_surface(lines))
# Memory from earlier sessions
## decision
- We chose Postgres over MySQL.
## gotcha
- Safari drops the cookie on redirect.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

from ...core.forms import estimate_tokens
from ...core.salience import HUB_ACCESS_COUNT, HUB_CENTRALITY
from .categories import CATEGORIES

__all__ = [
    "HIGH_VALUE",
    "LINE_CHARS",
    "SEED_PROFILE",
    "SURFACE_TITLE",
    "SURFACE_TOKENS",
    "RankingProfile",
    "SurfaceLine",
    "compose_surface",
    "decayed_confidence",
    "line_text",
    "same_text_key",
    "rank_ppm",
]

DAY_MS = 86_400_000
#: the surface's token ceiling (the seed's window is 300-500 tokens)
SURFACE_TOKENS = 500
#: the first line of the surface
SURFACE_TITLE = "# Memory from earlier sessions"
#: a memory's line is cut to this many characters (a long memory must not eat the window)
LINE_CHARS = 280
#: the rank (ppm) from which a line may go past its category's line budget, into the lines
#: the other categories leave unused (0.6: e.g. confidence 0.9 and priority 8)
HIGH_VALUE = 600_000


class RankingProfile(NamedTuple):
    """A ranking formula's weights (see the module doc)."""

    name: str
    confidence: float
    priority: float
    centrality: float
    frequency: float
    branch_bonus: float


#: the seed plugin's formula
SEED_PROFILE = RankingProfile("cortex-seed", 0.5, 0.2, 0.15, 0.15, 0.1)


def decayed_confidence(
    confidence: float,
    category: str,
    *,
    age_ms: int,
    pinned: bool,
    access_count: int,
    centrality: float,
) -> float:
    """``confidence`` after ``age_ms`` of decay at ``category``'s half-life.

    >>> decayed_confidence(0.8, "progress", age_ms=14 * DAY_MS, pinned=False,
    ...                    access_count=0, centrality=0.0)    # two 7-day half-lives
    0.2
    >>> decayed_confidence(0.8, "progress", age_ms=14 * DAY_MS, pinned=False,
    ...                    access_count=11, centrality=0.0)   # read often: 14 days
    0.4
    >>> decayed_confidence(0.8, "decision", age_ms=400 * DAY_MS, pinned=False,
    ...                    access_count=0, centrality=0.0)    # stable
    0.8
    """
    days = CATEGORIES[category].half_life_days if category in CATEGORIES else None
    if pinned or days is None:
        return confidence
    half_life = days * DAY_MS
    if access_count > HUB_ACCESS_COUNT or centrality > HUB_CENTRALITY:
        half_life *= 2
    return confidence * float(0.5 ** (max(age_ms, 0) / half_life))


def rank_ppm(
    profile: RankingProfile,
    *,
    confidence: float,
    priority: int,
    centrality: float,
    frequency: float,
    same_branch: bool,
) -> int:
    """A memory's rank under ``profile``, in parts per million (higher ranks first).

    >>> rank_ppm(SEED_PROFILE, confidence=0.8, priority=7, centrality=0.5, frequency=0.0,
    ...          same_branch=True)     # 0.4 + 0.14 + 0.075 + 0 + 0.1
    715000
    """
    value = (
        profile.confidence * confidence
        + profile.priority * priority / 10
        + profile.centrality * centrality
        + profile.frequency * frequency
        + (profile.branch_bonus if same_branch else 0.0)
    )
    return round(value * 1_000_000)


class SurfaceLine(NamedTuple):
    """A memory as a candidate surface line.

    Attributes:
        category: its category (a key of :data:`~.categories.CATEGORIES`).
        rank: its rank in ppm.
        text: the line's text (without the leading ``- ``).
        key: a unique tie-breaker (the memory's id in hex, with its store).
        label: where it comes from when that is not the project (``global``), shown as
            ``[global]`` before the text.
    """

    category: str
    rank: int
    text: str
    key: str
    label: str = ""


def line_text(text: str, label: str = "") -> str:
    """A memory's text as one surface line: ``- ``, the ``[label]`` if any, and its words
    on one line, cut to :data:`LINE_CHARS` characters."""
    flat = " ".join(text.split())
    if len(flat) > LINE_CHARS:
        flat = flat[: LINE_CHARS - 1].rstrip() + "…"
    return f"- [{label}] {flat}" if label else f"- {flat}"


def same_text_key(text: str) -> str:
    """What two memories' texts are compared by for repeats: the words, case-folded."""
    return " ".join(text.split()).casefold()


def _header(category: str) -> str:
    return f"## {category}"


def compose_surface(
    lines: Iterable[SurfaceLine],
    *,
    max_tokens: int = SURFACE_TOKENS,
    estimator: Callable[[str], int] = estimate_tokens,
) -> str:
    """The surface text of ``lines`` (see the module doc); ``""`` when none fit.

    A line whose text repeats a better-ranked one (the same memory in the project and the
    global store) is left out.
    """
    by_category: dict[str, list[tuple[int, str, str]]] = {}
    seen: set[str] = set()
    for line in sorted(lines, key=lambda ln: (-ln.rank, ln.key)):
        budget = CATEGORIES[line.category].budget if line.category in CATEGORIES else 0
        text = line_text(line.text, line.label)
        if budget == 0 or same_text_key(line.text) in seen:
            continue
        seen.add(same_text_key(line.text))
        by_category.setdefault(line.category, []).append((line.rank, line.key, text))
    total_lines = sum(c.budget for c in CATEGORIES.values())
    chosen: dict[str, list[tuple[int, str, str]]] = {name: [] for name in by_category}
    used = estimator(SURFACE_TITLE)

    def cost(category: str, text: str) -> int:
        # each line follows a newline, which a tokenizer counts too
        head = estimator("\n" + _header(category)) if not chosen[category] else 0
        return head + estimator("\n" + text)

    # pass 1: each category within its share of the window
    for category, candidates in by_category.items():
        share = max_tokens * CATEGORIES[category].budget // total_lines
        spent = 0
        for item in candidates:
            if len(chosen[category]) >= CATEGORIES[category].budget:
                break
            price = cost(category, item[2])
            if spent + price > share or used + price > max_tokens:
                break
            chosen[category].append(item)
            spent += price
            used += price
    # pass 2: the rest of the window to the best remaining lines of any category
    rest = [
        (item, category)
        for category, candidates in by_category.items()
        for item in candidates[len(chosen[category]) :]
    ]
    for item, category in sorted(rest, key=lambda pair: (-pair[0][0], pair[0][1])):
        lines_used = sum(len(items) for items in chosen.values())
        if len(chosen[category]) >= CATEGORIES[category].budget and (
            item[0] < HIGH_VALUE or lines_used >= total_lines
        ):
            continue  # only a high-value line borrows the lines other categories left
        price = cost(category, item[2])
        if used + price > max_tokens:
            continue
        chosen[category].append(item)
        used += price
    while True:
        out = [SURFACE_TITLE]
        for category in CATEGORIES:
            picked = sorted(chosen.get(category, ()), key=lambda item: (-item[0], item[1]))
            if picked:
                out.append(_header(category))
                out.extend(item[2] for item in picked)
        text = "\n".join(out) if len(out) > 1 else ""
        if estimator(text) <= max_tokens:
            return text
        # an estimator that is not additive over lines: drop the weakest line and retry
        ranked = sorted(
            ((item, category) for category, items in chosen.items() for item in items),
            key=lambda pair: (-pair[0][0], pair[0][1]),
        )
        item, category = ranked[-1]
        chosen[category].remove(item)
