"""The Claude Code plugin's categories and settings file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cortexgraph.core.extraction import CATEGORIES as EXTRACTION_CATEGORIES
from cortexgraph.errors import ValidationError
from cortexgraph.integrations.claude_code.categories import (
    CATEGORIES,
    HALF_LIVES,
    category_of,
    memory_class,
)
from cortexgraph.integrations.claude_code.config import PluginConfig, load_config


def test_categories_agree_with_the_extractors_mapping() -> None:
    """The plugin writes each seed category as the same type and tag as an LLM extraction
    does, so a memory from /remember and one from the Stop hook land in the same place."""
    for name, (type_name, tag) in EXTRACTION_CATEGORIES.items():
        assert CATEGORIES[name].type_name == type_name
        assert tag == name


def test_the_seed_budgets_and_half_lives() -> None:
    """The seed's line budgets and half-lives, as its specification lists them."""
    budgets = {name: c.budget for name, c in CATEGORIES.items()}
    assert budgets == {
        "architecture": 25, "decision": 25, "rule": 20, "pattern": 25, "gotcha": 20,
        "progress": 30, "preference": 15, "context": 15, "code_description": 10, "code": 0,
    }
    assert {k: v for k, v in HALF_LIVES.items() if v is not None} == {
        "pattern": 60, "gotcha": 45, "progress": 7, "preference": 180, "context": 30,
    }


def test_category_of_prefers_a_tag_then_the_type() -> None:
    """A category tag wins (first in surface order); without one the type decides; the
    execution-side types have none."""
    assert category_of(["zeta", "progress", "decision"], "event") == "decision"
    assert category_of([], "constraint") == "gotcha"
    assert category_of([], "attest") is None
    assert memory_class("gotcha") == "constraint"
    with pytest.raises(ValidationError) as caught:
        memory_class("gossip")
    assert caught.value.field == "type"


def test_defaults_without_a_file(tmp_path: Path) -> None:
    """No settings file anywhere: keyword recall, the rule extractor, 300 tokens."""
    config = load_config(tmp_path / "proj", {"CORTEXGRAPH_HOME": str(tmp_path / "home")})
    assert config == PluginConfig()
    assert config.make_embedder() is None and config.make_extractor() is None


def test_project_file_wins_over_the_global_one(tmp_path: Path) -> None:
    """The project's settings are read first; the global directory's only without them."""
    home, project = tmp_path / "home", tmp_path / "proj"
    (project / ".memory").mkdir(parents=True)
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"embedder": "hash"}))
    environ = {"CORTEXGRAPH_HOME": str(home)}
    assert load_config(project, environ).embedder == "hash"
    (project / ".memory" / "config.json").write_text(
        json.dumps({"extractor": {"command": ["claude", "-p"], "timeout": 60}})
    )
    config = load_config(project, environ)
    assert config.embedder is None
    assert config.extractor_command == ("claude", "-p") and config.extractor_timeout == 60.0
    assert config.make_extractor() is not None
    assert config.make_embedder() is None


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ([], "config"),
        ({"embeder": "hash"}, "embeder"),
        ({"embedder": "gpt"}, "embedder"),
        ({"extractor": "llm"}, "extractor"),
        ({"extractor": {"command": []}}, "extractor.command"),
        ({"extractor": {"command": ["claude", ""]}}, "extractor.command"),
        ({"extractor": {"command": ["x"], "timeout": 0}}, "extractor.timeout"),
        ({"prompt_tokens": 10}, "prompt_tokens"),
        ({"prompt_tokens": True}, "prompt_tokens"),
    ],
)
def test_bad_settings_name_the_key(tmp_path: Path, document: object, field: str) -> None:
    """Each bad settings document is a ValidationError naming the key and the file."""
    (tmp_path / ".memory").mkdir()
    path = tmp_path / ".memory" / "config.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValidationError) as caught:
        load_config(tmp_path, {"CORTEXGRAPH_HOME": str(tmp_path / "home")})
    assert caught.value.field == field
    assert str(path) in str(caught.value)


def test_invalid_json_names_the_file(tmp_path: Path) -> None:
    """A settings file that is not JSON is refused, naming the file."""
    (tmp_path / ".memory").mkdir()
    (tmp_path / ".memory" / "config.json").write_text("{embedder: hash")
    with pytest.raises(ValidationError, match="not valid JSON"):
        load_config(tmp_path, {"CORTEXGRAPH_HOME": str(tmp_path / "home")})
