"""The plugin's memory categories and how they map onto cortexgraph's types.

The Claude Code plugin sorts what it remembers into the categories of a coding session
(architecture, decision, pattern, gotcha, context, progress, code_description, code). A
memory's category is a tag; its cortexgraph type follows the mapping below, so the
library's typed queries (``Q.type(Constraint)``) and the plugin's categories
(``Q.tag("gotcha")``) both work. The rule extractor adds two tags of its own, ``rule``
(never/always/must statements) and ``preference``, which the plugin treats as categories
too: a coding session needs its rules in view as much as its gotchas.

Each category has a line budget on the surface (``code`` is never surfaced: raw code is
too large) and a half-life, the time after which an unread memory's confidence counts
half (``None``: stable, it never decays).

>>> CATEGORIES["gotcha"].type_name, CATEGORIES["gotcha"].half_life_days
('constraint', 45)
>>> category_of(("deploy", "gotcha"), "constraint")
'gotcha'
>>> category_of(("deploy",), "event")     # no category tag: the type's default category
'progress'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ...errors import ValidationError

__all__ = ["CATEGORIES", "HALF_LIVES", "Category", "category_of", "memory_class"]


class Category(NamedTuple):
    """One category: its cortexgraph type, surface line budget and half-life in days."""

    type_name: str
    budget: int
    half_life_days: int | None


#: the categories in surface order (the order the surface lists them in)
CATEGORIES: dict[str, Category] = {
    "architecture": Category("fact", 25, None),
    "decision": Category("fact", 25, None),
    "rule": Category("constraint", 20, None),
    "pattern": Category("pattern", 25, 60),
    "gotcha": Category("constraint", 20, 45),
    "progress": Category("event", 30, 7),
    "preference": Category("preference", 15, 180),
    "context": Category("fact", 15, 30),
    "code_description": Category("fact", 10, None),
    "code": Category("artifact_ref", 0, None),
}

#: ``Cortex.compact(half_lives=...)``'s mapping: each category tag's half-life in days
HALF_LIVES: dict[str, int | None] = {
    name: category.half_life_days for name, category in CATEGORIES.items()
}

#: the category of a memory that carries no category tag, by its type
_BY_TYPE = {
    "fact": "context",
    "constraint": "gotcha",
    "pattern": "pattern",
    "event": "progress",
    "preference": "preference",
    "goal": "progress",
    "artifact_ref": "code",
}


def category_of(tags: Iterable[str], type_name: str) -> str | None:
    """The category of a memory with ``tags`` and type ``type_name``: its first category
    tag in :data:`CATEGORIES` order, else its type's default category (None for the
    execution-side types, which are never surfaced)."""
    carried = set(tags)
    for name in CATEGORIES:
        if name in carried:
            return name
    return _BY_TYPE.get(type_name)


def memory_class(category: str) -> str:
    """The cortexgraph type name a memory of ``category`` is written as.

    Raises:
        ValidationError: ``category`` is not one of :data:`CATEGORIES` (field ``type``).
    """
    if category not in CATEGORIES:
        raise ValidationError(
            f"unknown category {category!r}; expected one of {', '.join(CATEGORIES)}",
            field="type",
        )
    return CATEGORIES[category].type_name
