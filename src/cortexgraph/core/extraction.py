"""Extraction, the pure half: transcripts in, candidate memories out.

This module holds what needs no I/O: the records an extractor reads and returns
(:class:`Turn`, :class:`ExtractionContext`, :class:`ExtractionInput`, :class:`Candidate`,
:class:`ProposedEdge`), the deterministic :class:`RuleExtractor`, the prompt builder
(:func:`build_prompt`) that the LLM-backed extractors send, the parser of their answers
(:func:`parse_candidates`) and the mapping of a candidate onto a memory
(:meth:`Candidate.to_memory`). The shell (:mod:`cortexgraph.extract`) runs commands, talks
HTTP, chunks transcripts and writes to the store.

A candidate's ``type`` is one of the seven remembered types of the taxonomy (never Attest
or LearnWeights). An LLM may also answer with the eight categories of the coding-assistant
memory plugin; they map onto our types and keep their name as a tag (:data:`CATEGORIES`).
Relations are normalised through :func:`~cortexgraph.core.graph.normalise_relation`, and
``supersedes`` is refused: replacing a memory is a human decision.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from ..errors import ExtractionError, ValidationError
from .graph import normalise_relation
from .taxonomy import (
    ArtifactRef,
    Constraint,
    Event,
    Fact,
    Goal,
    Memory,
    Pattern,
    Preference,
    Source,
)

__all__ = [
    "CANDIDATE_TYPES",
    "CATEGORIES",
    "Candidate",
    "ExtractionContext",
    "ExtractionInput",
    "ParseResult",
    "ProposedEdge",
    "ROLES",
    "RuleExtractor",
    "SCOPES",
    "Turn",
    "build_prompt",
    "candidate_from_map",
    "candidates_to_maps",
    "extraction_relation",
    "parse_candidates",
]

ROLES = ("user", "assistant", "system", "tool")
SCOPES = ("project", "global")
CANDIDATE_TYPES: dict[str, type[Memory]] = {
    "goal": Goal,
    "preference": Preference,
    "constraint": Constraint,
    "fact": Fact,
    "pattern": Pattern,
    "event": Event,
    "artifact_ref": ArtifactRef,
}
CATEGORIES: dict[str, tuple[str, str]] = {
    "architecture": ("fact", "architecture"),
    "decision": ("fact", "decision"),
    "context": ("fact", "context"),
    "code_description": ("fact", "code_description"),
    "pattern": ("pattern", "pattern"),
    "gotcha": ("constraint", "gotcha"),
    "progress": ("event", "progress"),
    "code": ("artifact_ref", "code"),
}
"""The coding-assistant plugin's categories: ``category -> (our type, tag added)``."""

MAX_CANDIDATES = 200
"""The most candidates one answer may hold; the rest are skipped (counted)."""
MAX_CANDIDATE_TEXT = 8192
"""The longest candidate text accepted from an extractor, in characters."""


def _str(field: str, *, optional: bool = False) -> Any:
    def check(_: Any, __: Any, value: Any) -> None:
        if value is None and optional:
            return
        if type(value) is not str:
            raise ValidationError(f"must be a string, not {type(value).__name__}", field=field)

    return check


def _str_tuple(field: str) -> Any:
    def check(_: Any, __: Any, value: Any) -> None:
        if not all(type(item) is str and item for item in value):
            raise ValidationError("must be non-empty strings", field=field)

    return check


def _tuple_of_str(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _tuple_of_turns(value: Iterable[Turn]) -> tuple[Turn, ...]:
    return tuple(value)


def _tuple_of_edges(value: Iterable[ProposedEdge]) -> tuple[ProposedEdge, ...]:
    return tuple(value)


def _get(item: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """``item[key]`` typed as Any (the JSON of a model's answer)."""
    return item.get(key, default)


@attrs.frozen
class Turn:
    """One turn of a transcript.

    Attributes:
        role: ``user``, ``assistant``, ``system`` or ``tool``.
        text: what was said (tool calls and results rendered as text).
        at: when, in ms since the epoch, if known.
    """

    role: str = attrs.field()
    text: str = attrs.field(validator=_str("text"))
    at: int | None = attrs.field(default=None)

    @role.validator
    def _role(self, _: Any, value: Any) -> None:
        if value not in ROLES:
            raise ValidationError(f"must be one of {', '.join(ROLES)}, not {value!r}", field="role")

    @at.validator
    def _at(self, _: Any, value: Any) -> None:
        if value is not None and (type(value) is not int or value < 0):
            raise ValidationError("must be a non-negative int (ms) or None", field="at")


@attrs.frozen
class ExtractionContext:
    """What surrounds a transcript: the project, where and on which branch it ran."""

    project: str | None = attrs.field(default=None, validator=_str("project", optional=True))
    cwd: str | None = attrs.field(default=None, validator=_str("cwd", optional=True))
    branch: str | None = attrs.field(default=None, validator=_str("branch", optional=True))
    commits: tuple[str, ...] = attrs.field(
        default=(), converter=_tuple_of_str, validator=_str_tuple("commits")
    )
    changed_files: tuple[str, ...] = attrs.field(
        default=(), converter=_tuple_of_str, validator=_str_tuple("changed_files")
    )


@attrs.frozen
class ExtractionInput:
    """A transcript (or one chunk of it) and its optional context."""

    turns: tuple[Turn, ...] = attrs.field(converter=_tuple_of_turns)
    context: ExtractionContext = attrs.field(factory=ExtractionContext)

    @turns.validator
    def _turns(self, _: Any, value: tuple[Any, ...]) -> None:
        if not all(isinstance(turn, Turn) for turn in value):
            raise ValidationError("must be Turn records", field="turns")

    @context.validator
    def _context(self, _: Any, value: Any) -> None:
        if not isinstance(value, ExtractionContext):
            raise ValidationError("must be an ExtractionContext", field="context")


def extraction_relation(name: object) -> str:
    """The canonical relation for an extractor's edge; ``supersedes`` is refused.

    >>> extraction_relation("derives"), extraction_relation("related")
    ('derived_from', 'relates_to')

    Raises:
        ValidationError: an unknown relation, or ``supersedes`` (field ``relation``).
    """
    relation = normalise_relation(name)
    if relation == "supersedes":
        raise ValidationError(
            "supersedes is never accepted from an extractor (a person decides what a"
            " memory replaces)",
            field="relation",
        )
    return relation


def _unit(value: Any, field: str) -> float:
    if type(value) not in (int, float) or not 0.0 <= value <= 1.0:
        raise ValidationError(f"must be a number from 0 to 1, not {value!r}", field=field)
    return float(value)


@attrs.frozen
class ProposedEdge:
    """An edge an extractor proposes from its candidate to another candidate of the same
    answer (``target`` is that candidate's index)."""

    target: int = attrs.field()
    relation: str = attrs.field(converter=extraction_relation)
    strength: float = attrs.field(default=0.5)

    @target.validator
    def _target(self, _: Any, value: Any) -> None:
        if type(value) is not int or value < 0:
            raise ValidationError("must be a non-negative int (a candidate index)", field="to")

    @strength.validator
    def _strength(self, _: Any, value: Any) -> None:
        _unit(value, "strength")


@attrs.frozen
class Candidate:
    """A memory an extractor proposes, before dedup and before it is written.

    Attributes:
        type: one of :data:`CANDIDATE_TYPES`.
        text: the memory itself.
        summary: an optional short line.
        confidence: 0..1, how clear and actionable it is.
        priority: 1..10, how important.
        tags: keywords (normalised as the taxonomy does when it becomes a memory).
        scope: ``project`` (this project's namespace) or ``global`` (every project's).
        edges: edges to other candidates of the same answer.
        path: for an ``artifact_ref``, the file it names.
    """

    type: str = attrs.field()
    text: str = attrs.field(validator=_str("text"))
    summary: str | None = attrs.field(default=None, validator=_str("summary", optional=True))
    confidence: float = attrs.field(default=0.5)
    priority: int = attrs.field(default=5)
    tags: tuple[str, ...] = attrs.field(
        default=(), converter=_tuple_of_str, validator=_str_tuple("tags")
    )
    scope: str = attrs.field(default="project")
    edges: tuple[ProposedEdge, ...] = attrs.field(default=(), converter=_tuple_of_edges)
    path: str | None = attrs.field(default=None, validator=_str("path", optional=True))

    @type.validator
    def _type(self, _: Any, value: Any) -> None:
        if value not in CANDIDATE_TYPES:
            raise ValidationError(
                f"must be one of {', '.join(CANDIDATE_TYPES)}, not {value!r}", field="type"
            )

    @text.validator
    def _text(self, _: Any, value: str) -> None:
        if not value.strip():
            raise ValidationError("must not be empty", field="text")
        if len(value) > MAX_CANDIDATE_TEXT:
            raise ValidationError(
                f"is {len(value)} characters, over {MAX_CANDIDATE_TEXT}", field="text"
            )

    @confidence.validator
    def _confidence(self, _: Any, value: Any) -> None:
        _unit(value, "confidence")

    @priority.validator
    def _priority(self, _: Any, value: Any) -> None:
        if type(value) is not int or not 1 <= value <= 10:
            raise ValidationError(f"must be an int from 1 to 10, not {value!r}", field="priority")

    @scope.validator
    def _scope(self, _: Any, value: Any) -> None:
        if value not in SCOPES:
            raise ValidationError(f"must be project or global, not {value!r}", field="scope")

    @edges.validator
    def _edges(self, _: Any, value: tuple[Any, ...]) -> None:
        if not all(isinstance(edge, ProposedEdge) for edge in value):
            raise ValidationError("must be ProposedEdge records", field="edges")

    def to_memory(self, source: Source | None = None) -> Memory:
        """The memory this candidate becomes (validated by the taxonomy).

        Raises:
            ValidationError: the taxonomy refuses a field (a bad tag, say).
        """
        cls = CANDIDATE_TYPES[self.type]
        fields: dict[str, Any] = {
            "text": self.text.strip(),
            "summary": self.summary,
            "confidence": self.confidence,
            "priority": self.priority,
            "tags": self.tags,
            "source": source,
        }
        if cls is ArtifactRef and self.path:
            fields["path"] = self.path
        return cls(**fields)


# ---------------------------------------------------------------------------
# The prompt


_PROMPT_HEAD = """\
You extract durable memories from a conversation between a user and an assistant.
Return ONLY a JSON array. Each element is an object with these keys:
  "type": one of goal, preference, constraint, fact, pattern, event, artifact_ref
      (goal: what someone is trying to achieve; preference: how the user likes things;
       constraint: a rule (never/always/must) or a gotcha to avoid; fact: architecture,
       a decision with its reason, or context; pattern: a reusable way of doing things;
       event: progress or something that happened; artifact_ref: a file or command)
  "text": the memory, one or two self-contained sentences
  "summary": a short line (optional)
  "confidence": 0 to 1, how clear and actionable it is
  "priority": 1 to 10, how important it is
  "tags": a list of lowercase keywords
  "scope": "project" if it is about this project, "global" if useful everywhere
  "path": for an artifact_ref, the file path (optional)
  "edges": optional list of {"to": index of another element, "relation": one of
      relates_to, derived_from, contradicts, exemplifies, refines, source_of,
      "strength": 0 to 1}
Do not propose "supersedes" edges. Skip small talk and anything already obvious.
If nothing is worth remembering, return [].
"""


def build_prompt(source: ExtractionInput) -> str:
    """The extraction prompt for ``source``: instructions, context, then the transcript.

    Pure and deterministic: the same input gives the same string.

    >>> p = build_prompt(ExtractionInput([Turn("user", "Never push to main.")]))
    >>> p.splitlines()[-1]
    '[user] Never push to main.'
    """
    lines = [_PROMPT_HEAD]
    ctx = source.context
    context = [
        ("Project", ctx.project),
        ("Working directory", ctx.cwd),
        ("Git branch", ctx.branch),
        ("Recent commits", "; ".join(ctx.commits) or None),
        ("Changed files", ", ".join(ctx.changed_files) or None),
    ]
    shown = [f"{name}: {value}" for name, value in context if value]
    if shown:
        lines.append("Context:")
        lines.extend(shown)
        lines.append("")
    lines.append("Transcript:")
    lines.extend(f"[{turn.role}] {turn.text}" for turn in source.turns)
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Parsing an extractor's answer


@attrs.frozen
class ParseResult:
    """The candidates an answer held, and what was skipped: ``(locator, reason)`` pairs
    such as ``("candidate 3", "type: must be one of ...")``."""

    candidates: tuple[Candidate, ...]
    skipped: tuple[tuple[str, str], ...]


_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)```", re.S)
_MAX_STARTS = 64  # JSON start positions tried before an answer counts as garbage


def _json_values(text: str) -> list[Any]:
    """JSON arrays or objects found in ``text``: fenced blocks first, then any ``[`` or
    ``{`` from which a whole value decodes (text around it is ignored)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    bodies = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for body in bodies:
        tries = 0
        for match in re.finditer(r"[\[{]", body):
            tries += 1
            if tries > _MAX_STARTS:
                break
            try:
                value, _ = decoder.raw_decode(body, match.start())
            except ValueError:
                continue
            found.append(value)
            break
        if found:
            break
    return found


def _candidate_list(value: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in ("memories", "candidates"):
            if isinstance(value.get(key), list):
                return list(value[key])
    return None


def candidate_from_map(item: object) -> tuple[Candidate, list[str]]:
    """One candidate from its JSON map, and the reasons any of its edges were dropped.

    Accepts the plugin's categories for ``type`` (:data:`CATEGORIES`), adding the category
    as a tag. Unknown keys are ignored: models add commentary fields.

    Raises:
        ValidationError: the map is not a valid candidate (``field`` names what).
    """
    if not isinstance(item, Mapping):
        raise ValidationError(
            f"must be a JSON object, not {type(item).__name__}", field="candidate"
        )
    kind = _get(item, "type")
    tags = _get(item, "tags", [])
    if not isinstance(tags, list):
        raise ValidationError("must be a list of strings", field="tags")
    if isinstance(kind, str):
        kind = kind.strip().lower()
        if kind not in CANDIDATE_TYPES and kind in CATEGORIES:
            kind, tag = CATEGORIES[kind]
            tags = [*tags, tag]
    dropped: list[str] = []
    edges: list[ProposedEdge] = []
    raw_edges = _get(item, "edges", [])
    if not isinstance(raw_edges, list):
        raise ValidationError("must be a list", field="edges")
    for n, edge in enumerate(raw_edges):
        try:
            if not isinstance(edge, Mapping):
                raise ValidationError("must be a JSON object", field="edge")
            edges.append(
                ProposedEdge(
                    target=_get(edge, "to"),
                    relation=_get(edge, "relation"),
                    strength=_get(edge, "strength", 0.5),
                )
            )
        except ValidationError as error:
            dropped.append(f"edge {n}: {error}")
    candidate = Candidate(
        type=kind,
        text=_get(item, "text"),
        summary=_get(item, "summary") or None,
        confidence=_get(item, "confidence", 0.5),
        priority=_get(item, "priority", 5),
        tags=tuple(tags),
        scope=_get(item, "scope", "project"),
        edges=tuple(edges),
        path=_get(item, "path") or None,
    )
    return candidate, dropped


def parse_candidates(text: str) -> ParseResult:
    """The candidates in an extractor's answer.

    Tolerates code fences and prose around the JSON. The answer may be a JSON array of
    candidates or an object holding one under ``"memories"`` or ``"candidates"``. Each
    candidate is validated on its own: a malformed one, an edge to a missing candidate or
    a ``supersedes`` edge is skipped and reported, the rest are kept. Edges are
    re-indexed onto the kept candidates.

    >>> r = parse_candidates('Sure!\\n```json\\n[{"type": "constraint", "text": "Never'
    ...                      ' push to main"}, {"type": "mood", "text": "x"}]\\n```')
    >>> [c.text for c in r.candidates], r.skipped[0][0]
    (['Never push to main'], 'candidate 1')

    Raises:
        ExtractionError: the answer holds no JSON array of candidates at all.
    """
    if type(text) is not str:
        raise ExtractionError(f"the extractor's answer must be text, not {type(text).__name__}")
    items: list[Any] | None = None
    for value in _json_values(text):
        items = _candidate_list(value)
        if items is not None:
            break
    if items is None:
        head = text.strip()[:80]
        raise ExtractionError(f"the extractor's answer holds no JSON array of candidates: {head!r}")
    skipped: list[tuple[str, str]] = []
    if len(items) > MAX_CANDIDATES:
        skipped.append((f"candidates {MAX_CANDIDATES}-{len(items) - 1}", "over the limit"))
        items = items[:MAX_CANDIDATES]
    kept: dict[int, tuple[Candidate, list[str]]] = {}
    for n, item in enumerate(items):
        try:
            kept[n] = candidate_from_map(item)
        except ValidationError as error:
            skipped.append((f"candidate {n}", str(error)))
    index = {old: new for new, old in enumerate(kept)}
    candidates = []
    for old, (candidate, dropped) in kept.items():
        skipped.extend((f"candidate {old}", reason) for reason in dropped)
        edges = []
        for edge in candidate.edges:
            if edge.target in index and edge.target != old:
                edges.append(attrs.evolve(edge, target=index[edge.target]))
            else:
                skipped.append((f"candidate {old}", f"edge to {edge.target}: no such candidate"))
        candidates.append(attrs.evolve(candidate, edges=tuple(edges)))
    return ParseResult(tuple(candidates), tuple(skipped))


# ---------------------------------------------------------------------------
# The rule extractor


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


# (type, tag, confidence, priority, pattern); the first rule that matches a sentence wins.
_RULES: tuple[tuple[str, str, float, int, re.Pattern[str]], ...] = (
    (
        "constraint",
        "gotcha",
        0.7,
        7,
        _rx(
            r"\b(gotcha|watch out|be careful|careful:|turns out|turned out|the (problem|issue|"
            r"bug|catch|trick) (was|is)|root cause|caveat|beware|pitfall|silently|footgun)\b"
        ),
    ),
    (
        "constraint",
        "rule",
        0.75,
        8,
        _rx(
            r"\b(never|always|must|mustn't|do not ever|don't ever|under no circumstances|"
            r"is required to|are required to|is not allowed|are not allowed|only ever)\b|"
            r"(?<!please )\b(don't|do not) (use|touch|change|commit|push|edit|delete|call|"
            r"run|merge|deploy|import)\b"
        ),
    ),
    (
        "fact",
        "decision",
        0.75,
        7,
        _rx(
            r"\b((we|i)( have| had|'ve)? (decided|chose|opted|agreed|settled on)|"
            r"let's (go with|use|stick with|keep)|we('ll| will) (go with|use|stick with)|"
            r"going with|decision:|instead of)\b"
        ),
    ),
    (
        "preference",
        "preference",
        0.7,
        6,
        _rx(
            r"\b(i( really| much| strongly)? (prefer|like|love|hate|dislike|can't stand)|"
            r"i'd rather|i would rather|i'd prefer|i don't like|i do not like|"
            r"my favou?rite|i'm a fan of|please (use|keep|write|don't|do not|avoid))\b"
        ),
    ),
    (
        "event",
        "progress",
        0.7,
        5,
        _rx(
            r"(^((i|we)( have|'ve| just)? )?(finished|completed|implemented|fixed|merged|"
            r"shipped|deployed|released|migrated|refactored|added|updated|created|wrote|"
            r"rewrote|replaced|converted|upgraded|removed)\b|\ball \d+ tests pass|"
            r"\b(tests? (are |now )?pass(es|ing)?|(is|are) (now )?(done|complete|merged|"
            r"deployed|released|shipped|fixed|live)|(has|have) been (merged|deployed|"
            r"released|fixed|shipped)))"
        ),
    ),
    (
        "pattern",
        "pattern",
        0.65,
        6,
        _rx(
            r"\b(by convention|our convention|the convention|the pattern (is|we)|"
            r"(every|each|all) (\w+ ){0,3}(follows?|goes through|go through) )"
        ),
    ),
    (
        "goal",
        "goal",
        0.7,
        7,
        _rx(r"\b((our|the|my) (main )?goal (is|for)|we('re| are) trying to|the aim is)\b"),
    ),
    (
        "fact",
        "personal",
        0.6,
        5,
        _rx(
            r"^(just so you know,? |fyi,? )?(i'm (a |an )?\w+(,|\.|$| and)|i am (a |an )?\w+"
            r"(,|\.|$| and)|i (work|live|study) |my \w+('s)? (\w+ )?(is|are|was) |"
            r"our \w+ (\w+ )?(is|are) )"
        ),
    ),
    (
        "fact",
        "architecture",
        0.65,
        5,
        _rx(
            r"\b(lives? in|(is|are) stored in|runs? on|(is|are) hosted on|"
            r"(is|are) built (on|with)|(is|are) written in|talks to|(is|are) backed by|"
            r"depends on|(is|are) owned by)\b"
        ),
    ),
)
_SCOPE = {"preference": "global"}

_CODE_BLOCK = re.compile(r"```.*?(```|$)", re.S)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_BULLET = re.compile(r"^\s*([-*+>]|\d+[.)])\s+")
_PATH = re.compile(
    r"(?<![\w/.@:-])((?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]*\.[A-Za-z0-9]{1,8}|"
    r"(?:[\w-]+/)*[\w-]+(?:\.[\w-]+)*\.(?:py|ts|tsx|js|jsx|rs|go|java|rb|md|toml|yaml|yml|json|sh|sql|"
    r"cfg|ini|lock|txt|c|h|cpp|hpp|css|html|vue|kt|swift|env))(?![\w/])"
)
_COMMAND_WORDS = (
    "git|pytest|python|python3|pip|uv|npm|npx|pnpm|yarn|node|make|cargo|go|docker|"
    "kubectl|terraform|helm|brew|apt|apt-get|ruff|mypy|tox|poetry|bundle|rails|gradle|mvn|"
    "psql|redis-cli|curl|ssh|rsync|alembic|dotnet|deno|bun|just|aws|gcloud|sqlite3|jq"
)
_COMMAND = re.compile(rf"^(?:{_COMMAND_WORDS})(?:\s+\S+)*$")
_INLINE = re.compile(r"`([^`\n]{2,200})`")
_PROMPT_LINE = re.compile(r"^\s*\$\s+(.+)$", re.M)
_MIN_WORDS = 4
_TOOL_CALL = "[tool "
_MAX_SENTENCE = 400
_URL = re.compile(r"https?://\S+")


def _sentences(text: str) -> list[str]:
    # a tool call is rendered as one "[tool Name] {input}" line: its input is the
    # program's (code, a command), not a statement of the conversation
    spoken = "\n".join(line for line in text.split("\n") if not line.startswith(_TOOL_CALL))
    prose = _CODE_BLOCK.sub(" ", spoken)
    out = []
    for raw in _SENTENCE.split(prose):
        sentence = " ".join(_BULLET.sub("", raw).split())
        if len(sentence.split()) >= _MIN_WORDS and not sentence.endswith("?"):
            out.append(sentence[:_MAX_SENTENCE])
    return out


def _paths(text: str) -> list[str]:
    found = []
    for match in _PATH.finditer(_URL.sub(" ", text)):
        path = match.group(1).rstrip(".")
        if "." in path and not re.fullmatch(r"[\d.]+", path):
            found.append(path)
    return found


def _commands(text: str) -> list[str]:
    found = [m.group(1).strip() for m in _PROMPT_LINE.finditer(text)]
    for block in re.finditer(r"```(?:bash|sh|shell|console|zsh)?[ \t]*\n(.*?)```", text, re.S):
        found.extend(line.strip().lstrip("$ ").strip() for line in block.group(1).splitlines())
    found.extend(m.group(1).strip() for m in _INLINE.finditer(text))
    return [c for c in found if _COMMAND.match(c)]


@attrs.frozen
class RuleExtractor:
    """The default extractor: keyword rules, no model, deterministic and pure.

    Each sentence of a user or assistant turn (code blocks and questions excluded) is
    matched against rules tried in order, and the first that matches makes one candidate:

    ==================  ===================  ===========================================
    finds               becomes              on words such as
    ==================  ===================  ===========================================
    gotchas             Constraint "gotcha"  turns out, watch out, the problem was
    rules               Constraint "rule"    never, always, must, don't ever
    decisions           Fact "decision"      we decided, let's go with, instead of
    preferences         Preference (global)  I prefer, I'd rather, please use
    progress            Event "progress"     fixed ..., all 12 tests pass, is merged
    patterns            Pattern              by convention, every X goes through
    goals               Goal                 our goal is, we're trying to
    architecture        Fact "architecture"  lives in, runs on, is backed by
    file paths          ArtifactRef "file"   ``src/app/models.py``
    commands            ArtifactRef          ``$ make test``, shell blocks, inline code
                        "command"            starting with a known tool
    ==================  ===================  ===========================================

    A sentence that names a file links to that file's ArtifactRef (``relates_to``).
    The same text is proposed once. Tool turns are not read, nor the tool calls inside a
    turn (lines ``[tool Name] {input}``, as transcripts render them): their output and
    their input are the program's, not statements of the conversation.

    >>> [c.type for c in RuleExtractor().extract(ExtractionInput(
    ...     [Turn("user", "Never force-push to main. Run `make test` first.")]))]
    ['constraint', 'artifact_ref']
    """

    def extract(self, source: ExtractionInput) -> list[Candidate]:
        """The candidates in ``source`` (see the class docstring for the rules)."""
        if not isinstance(source, ExtractionInput):
            raise ValidationError("must be an ExtractionInput", field="source")
        statements: list[tuple[Candidate, list[str]]] = []
        artifacts: dict[str, Candidate] = {}
        seen: set[str] = set()
        for turn in source.turns:
            if turn.role not in ("user", "assistant"):
                continue
            for sentence in _sentences(turn.text):
                candidate = self._statement(sentence)
                key = sentence.lower()
                if candidate is not None and key not in seen:
                    seen.add(key)
                    statements.append((candidate, _paths(sentence)))
            for path in _paths(_CODE_BLOCK.sub(" ", turn.text)):
                artifacts.setdefault(
                    "p:" + path,
                    Candidate(
                        type="artifact_ref",
                        text=f"File {path}",
                        path=path,
                        confidence=0.6,
                        priority=4,
                        tags=("file",),
                    ),
                )
            for command in _commands(turn.text):
                artifacts.setdefault(
                    "c:" + command,
                    Candidate(
                        type="artifact_ref",
                        text=f"Command: {command}",
                        confidence=0.6,
                        priority=4,
                        tags=("command",),
                    ),
                )
        order = {key: n for n, key in enumerate(artifacts, start=len(statements))}
        out = []
        for candidate, paths in statements:
            edges = tuple(
                ProposedEdge(order["p:" + path], "relates_to", 0.5)
                for path in dict.fromkeys(paths)
                if "p:" + path in order
            )
            out.append(attrs.evolve(candidate, edges=edges))
        out.extend(artifacts.values())
        return out

    @staticmethod
    def _statement(sentence: str) -> Candidate | None:
        for kind, tag, confidence, priority, pattern in _RULES:
            if pattern.search(sentence):
                return Candidate(
                    type=kind,
                    text=sentence,
                    confidence=confidence,
                    priority=priority,
                    tags=(tag,),
                    scope=_SCOPE.get(kind, "project"),
                )
        return None


def candidates_to_maps(candidates: Sequence[Candidate]) -> list[dict[str, Any]]:
    """Candidates as the JSON maps :func:`parse_candidates` reads (for tests and fakes)."""
    out = []
    for c in candidates:
        item: dict[str, Any] = {
            "type": c.type,
            "text": c.text,
            "confidence": c.confidence,
            "priority": c.priority,
            "tags": list(c.tags),
            "scope": c.scope,
        }
        if c.summary:
            item["summary"] = c.summary
        if c.path:
            item["path"] = c.path
        if c.edges:
            item["edges"] = [
                {"to": e.target, "relation": e.relation, "strength": e.strength} for e in c.edges
            ]
        out.append(item)
    return out
