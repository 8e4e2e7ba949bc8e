"""The pure half of extraction: RuleExtractor, relation names, the prompt builder and the
candidate parser."""

from __future__ import annotations

import pytest

from cortexgraph.core.extraction import (
    Candidate,
    ExtractionContext,
    ExtractionInput,
    ProposedEdge,
    RuleExtractor,
    Turn,
    build_prompt,
    extraction_relation,
    parse_candidates,
)
from cortexgraph.errors import ExtractionError, ValidationError


def _extract(*turns: tuple[str, str]) -> list[Candidate]:
    return RuleExtractor().extract(ExtractionInput([Turn(r, t) for r, t in turns]))


def test_rules_find_each_kind() -> None:
    """A constraint, a decision, a preference, progress, a gotcha, a file path and a
    command each become the documented type and tag."""
    found = _extract(
        ("user", "Never push directly to main."),
        ("assistant", "We decided to use SQLite with WAL mode."),
        ("user", "I prefer tabs over spaces."),
        ("assistant", "Fixed the crash in src/export/invoice.py, all 12 tests pass."),
        ("assistant", "Turns out the bank CSV files are Latin-1."),
        ("assistant", "Run it with:\n$ pytest -q tests"),
    )
    assert [(c.type, c.tags) for c in found] == [
        ("constraint", ("rule",)),
        ("fact", ("decision",)),
        ("preference", ("preference",)),
        ("event", ("progress",)),
        ("constraint", ("gotcha",)),
        ("artifact_ref", ("file",)),
        ("artifact_ref", ("command",)),
    ]
    assert found[5].path == "src/export/invoice.py"
    assert found[3].edges == (ProposedEdge(5, "relates_to", 0.5),)
    assert found[2].scope == "global" and found[0].scope == "project"


def test_questions_small_talk_code_and_tool_output_give_nothing() -> None:
    """Questions, greetings, code blocks and tool turns are not statements to remember."""
    assert (
        _extract(
            ("user", "Should we always use tabs?"),
            ("assistant", "Hi! How are you doing today, friend."),
            ("assistant", "```\n# never do this\nrm -rf /\n```"),
            ("tool", "error: you must never see this line"),
        )
        == []
    )


def test_rule_extractor_is_deterministic_and_deduplicates() -> None:
    """The same input gives equal output, and a sentence said twice is proposed once."""
    turns = (("user", "Never push to main."), ("assistant", "Never push to main."))
    assert _extract(*turns) == _extract(*turns)
    assert len(_extract(*turns)) == 1


def test_rule_extractor_refuses_other_inputs() -> None:
    """A list of turns instead of an ExtractionInput is a ValidationError (field source)."""
    with pytest.raises(ValidationError) as info:
        RuleExtractor().extract([Turn("user", "x")])  # type: ignore[arg-type]
    assert info.value.field == "source"


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("derives", "derived_from"),
        ("contradict", "contradicts"),
        ("related", "relates_to"),
        ("example", "exemplifies"),
        ("refine", "refines"),
        ("source", "source_of"),
        ("Relates_To", "relates_to"),
    ],
)
def test_relation_aliases_are_normalised(alias: str, name: str) -> None:
    """Each alias of the issue maps to its relation."""
    assert extraction_relation(alias) == name


@pytest.mark.parametrize("name", ["supersedes", "supersede", "replaces", 3])
def test_supersedes_and_unknown_relations_are_refused(name: object) -> None:
    """supersedes (and its alias) is never accepted from an extractor; unknown names and
    non-strings are refused too; all as ValidationError on ``relation``."""
    with pytest.raises(ValidationError) as info:
        extraction_relation(name)
    assert info.value.field == "relation"


def test_prompt_carries_context_and_turns_deterministically() -> None:
    """The prompt names the context and lists each turn as ``[role] text``."""
    source = ExtractionInput(
        [Turn("user", "Never push to main."), Turn("assistant", "OK.")],
        ExtractionContext(
            project="webshop", branch="fix/x", commits=["abc fix"], changed_files=["a.py", "b.py"]
        ),
    )
    prompt = build_prompt(source)
    assert prompt == build_prompt(source)
    assert "Project: webshop" in prompt and "Git branch: fix/x" in prompt
    assert "Changed files: a.py, b.py" in prompt and "supersedes" in prompt
    assert prompt.endswith("[user] Never push to main.\n[assistant] OK.")


@pytest.mark.parametrize(
    "answer",
    [
        '[{"type": "fact", "text": "A"}]',
        'Here you go:\n```json\n[{"type": "fact", "text": "A"}]\n```\nDone.',
        'Noise [not json] then {"memories": [{"type": "fact", "text": "A"}]} trailing',
        '```\n{"candidates": [{"type": "context", "text": "A"}]}\n```',
    ],
)
def test_parser_tolerates_fences_and_prose(answer: str) -> None:
    """Bare JSON, a fenced block with prose around it, an object under "memories" after
    a bracketed non-JSON phrase, and the plugin's category names all parse."""
    (candidate,) = parse_candidates(answer).candidates
    assert (candidate.type, candidate.text) == ("fact", "A")


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ({"type": "mood", "text": "x"}, "type"),
        ({"type": "fact"}, "text"),
        ({"type": "fact", "text": "   "}, "text"),
        ({"type": "fact", "text": "x", "confidence": 1.5}, "confidence"),
        ({"type": "fact", "text": "x", "priority": 0}, "priority"),
        ({"type": "fact", "text": "x", "scope": "team"}, "scope"),
        ({"type": "fact", "text": "x", "tags": "a,b"}, "tags"),
        ({"type": "fact", "text": "x" * 9000}, "text"),
        ("just a string", "candidate"),
    ],
)
def test_parser_skips_malformed_candidates(item: object, reason: str) -> None:
    """Each malformed candidate is skipped with a reason naming the field; the valid one
    beside it is kept."""
    import json

    result = parse_candidates(json.dumps([{"type": "fact", "text": "ok"}, item]))
    assert [c.text for c in result.candidates] == ["ok"]
    ((where, why),) = result.skipped
    assert where == "candidate 1" and why.startswith(reason)


def test_parser_reindexes_edges_and_drops_bad_ones() -> None:
    """Edges are re-indexed onto the kept candidates; edges to skipped or missing
    candidates, to themselves, and supersedes edges are dropped with a reason."""
    answer = """[
      {"type": "mood", "text": "skipped"},
      {"type": "fact", "text": "A", "edges": [{"to": 2, "relation": "derives"},
                                              {"to": 0, "relation": "related"},
                                              {"to": 2, "relation": "supersedes"},
                                              {"to": 1, "relation": "related"}]},
      {"type": "fact", "text": "B"}
    ]"""
    result = parse_candidates(answer)
    assert result.candidates[0].edges == (ProposedEdge(1, "derived_from", 0.5),)
    assert len(result.skipped) == 4


@pytest.mark.parametrize("answer", ["", "no json here", '{"x": 1}', "[1, 2", 42])
def test_answers_without_candidates_raise(answer: object) -> None:
    """An empty answer, prose, an object without a candidate list, truncated JSON and a
    non-string raise ExtractionError."""
    with pytest.raises(ExtractionError):
        parse_candidates(answer)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Turn("robot", "x"), "role"),
        (lambda: Turn("user", None), "text"),
        (lambda: Turn("user", "x", at=-1), "at"),
        (lambda: ExtractionInput(["x"]), "turns"),
        (lambda: ExtractionContext(commits=[""]), "commits"),
        (lambda: Candidate(type="attest", text="x"), "type"),
    ],
)
def test_records_validate_their_fields(make: object, field: str) -> None:
    """Bad turns, inputs, contexts and candidates are ValidationErrors naming the field
    (Attest is not a type an extractor may propose)."""
    with pytest.raises(ValidationError) as info:
        make()  # type: ignore[operator]
    assert info.value.field == field


def test_candidate_maps_to_memory_with_source() -> None:
    """A candidate becomes its taxonomy type with text stripped, tags normalised, the
    path for an ArtifactRef, and the given source."""
    from cortexgraph.core.taxonomy import ArtifactRef, Source

    memory = Candidate(
        type="artifact_ref", text=" File a.py ", tags=("File",), path="a.py"
    ).to_memory(Source(origin="llm", session="s"))
    assert isinstance(memory, ArtifactRef)
    assert (memory.text, memory.tags, memory.path) == ("File a.py", ("file",), "a.py")
    assert memory.source == Source(origin="llm", session="s")


def test_tool_call_inputs_are_not_statements() -> None:
    """An Edit whose code says "never" in a comment is the program's text, not a rule of the
    conversation: a rendered tool-call line yields no statement; the prose beside it does."""
    from cortexgraph.core.extraction import ExtractionInput, RuleExtractor, Turn

    text = (
        "I will update the retry loop now.\n"
        '[tool Edit] {"file_path": "billing/retry.py", "new_string": "# never retry a 4xx'
        ' response, it must fail fast"}\n'
        "We decided to cap retries at three attempts."
    )
    found = RuleExtractor().extract(ExtractionInput([Turn("assistant", text)]))
    statements = [c.text for c in found if c.type != "artifact_ref"]
    assert statements == ["We decided to cap retries at three attempts."]
