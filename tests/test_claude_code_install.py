"""Installing the Claude Code plugin: merging hooks into settings.json and taking them out
again byte for byte, the plugin directory, and where the stores live."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cortexgraph import ValidationError
from cortexgraph.cli import main
from cortexgraph.integrations.claude_code import install as install_module
from cortexgraph.integrations.claude_code.install import (
    BACKUP_NAME,
    HOOK_EVENTS,
    SLASH_COMMANDS,
    SettingsFileError,
    hooks_block,
    install,
    slash_command_line,
    uninstall,
    write_plugin,
)
from cortexgraph.integrations.claude_code.stores import global_store, project_store

PROGRAM = "/opt/venv/bin/cortexgraph"

# Unusual formatting on purpose (tabs, no trailing newline, non-ASCII, key order) so that
# only an exact restore gives these bytes back.
ORIGINAL = (
    b'{"model":"opus",\t"permissions": {"allow": ["Bash(git:*)"]},\n'
    b' "hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command":'
    b' "notify \xc3\xa9t\xc3\xa9"}]}],\n'
    b'  "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}]}}'
)


def _project(tmp_path: Path, raw: bytes | None = ORIGINAL) -> tuple[Path, Path, Path]:
    """A project directory, its settings file (holding ``raw`` unless None) and store dir."""
    project = tmp_path / "proj"
    settings = project / ".claude" / "settings.json"
    if raw is not None:
        settings.parent.mkdir(parents=True)
        settings.write_bytes(raw)
    else:
        project.mkdir()
    return project, settings, project / ".memory"


def _ours(data: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [
        g
        for g in data["hooks"].get(event, [])
        if g["hooks"][0]["command"].endswith(f"hook {event}")
    ]


def test_install_merges_and_keeps_unrelated_keys_and_hooks(tmp_path: Path) -> None:
    """Install adds one matcher group per event, of Claude Code's form, and keeps every
    other key and hook (including another Stop hook) as they were."""
    _, settings, store = _project(tmp_path)
    report = install(settings, store, program=PROGRAM)
    assert report.changed and report.action == "installed"
    data = json.loads(settings.read_bytes())
    before = json.loads(ORIGINAL)
    assert data["model"] == "opus" and data["permissions"] == before["permissions"]
    assert data["hooks"]["PreToolUse"] == before["hooks"]["PreToolUse"]
    assert data["hooks"]["Stop"][0] == before["hooks"]["Stop"][0]
    for event, timeout in HOOK_EVENTS:
        assert _ours(data, event) == [
            {
                "matcher": "",
                "hooks": [
                    {"type": "command", "command": f"{PROGRAM} hook {event}", "timeout": timeout}
                ],
            }
        ]


def test_install_twice_changes_no_byte(tmp_path: Path) -> None:
    """A second install reports ``unchanged`` and rewrites neither the settings file nor
    the backup record (same bytes, same inode and modification time)."""
    _, settings, store = _project(tmp_path)
    install(settings, store, program=PROGRAM)
    files = [settings, store / BACKUP_NAME]
    before = [(p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns) for p in files]
    report = install(settings, store, program=PROGRAM)
    assert not report.changed and report.action == "unchanged"
    assert [(p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns) for p in files] == before


def test_uninstall_gives_back_the_original_bytes(tmp_path: Path) -> None:
    """Install, install again, uninstall: the settings file holds exactly the original
    bytes and the backup record (and the store directory it created) is gone."""
    _, settings, store = _project(tmp_path)
    install(settings, store, program=PROGRAM)
    install(settings, store, program=PROGRAM)
    report = uninstall(settings, store)
    assert report.action == "restored"
    assert settings.read_bytes() == ORIGINAL
    assert not store.exists()


def test_uninstall_when_there_was_no_settings_file(tmp_path: Path) -> None:
    """With no settings file (nor .claude directory) before, install creates them and
    uninstall leaves the project as it found it."""
    project, settings, store = _project(tmp_path, raw=None)
    install(settings, store, program=PROGRAM)
    assert settings.is_file()
    uninstall(settings, store)
    assert sorted(os.listdir(project)) == []


def test_uninstall_keeps_the_store_directory(tmp_path: Path) -> None:
    """Uninstall removes only its backup record from a store directory holding a store."""
    _, settings, store = _project(tmp_path)
    (store / "project").mkdir(parents=True)
    install(settings, store, program=PROGRAM)
    uninstall(settings, store)
    assert sorted(os.listdir(store)) == ["project"]


def test_reinstall_with_another_program_replaces_ours(tmp_path: Path) -> None:
    """Installing with a different program replaces our groups (never two of ours per
    event), and uninstall still gives back the original bytes."""
    _, settings, store = _project(tmp_path)
    install(settings, store, program=PROGRAM)
    install(settings, store, program="/usr/bin/python3 -m cortexgraph.cli")
    data = json.loads(settings.read_bytes())
    for event, _ in HOOK_EVENTS:
        (group,) = _ours(data, event)
        assert group["hooks"][0]["command"] == f"/usr/bin/python3 -m cortexgraph.cli hook {event}"
    uninstall(settings, store)
    assert settings.read_bytes() == ORIGINAL


def test_uninstall_after_an_edit_removes_only_ours(tmp_path: Path) -> None:
    """When the file was edited after install, restoring the original would lose the edit:
    uninstall removes exactly our groups and keeps the edit and every other hook."""
    _, settings, store = _project(tmp_path)
    install(settings, store, program=PROGRAM)
    data = json.loads(settings.read_bytes())
    data["theme"] = "dark"
    settings.write_text(json.dumps(data), encoding="utf-8")
    report = uninstall(settings, store)
    assert report.action == "removed"
    after = json.loads(settings.read_bytes())
    expected = json.loads(ORIGINAL)
    expected["theme"] = "dark"
    assert after == expected
    assert not (store / BACKUP_NAME).exists()


def test_reinstall_after_an_edit_then_uninstall_keeps_the_edit(tmp_path: Path) -> None:
    """An edit after install, then a reinstall that changes our groups: the recorded
    original no longer matches the file, so uninstall removes only our groups."""
    _, settings, store = _project(tmp_path)
    install(settings, store, program=PROGRAM)
    data = json.loads(settings.read_bytes())
    data["theme"] = "dark"
    settings.write_text(json.dumps(data), encoding="utf-8")
    install(settings, store, program="/other/cortexgraph")
    assert uninstall(settings, store).action == "removed"
    expected = json.loads(ORIGINAL)
    expected["theme"] = "dark"
    assert json.loads(settings.read_bytes()) == expected


@pytest.mark.parametrize(
    "raw",
    [
        b'{"hooks": {',
        b"[1, 2]",
        b'{"hooks": []}',
        b'{"hooks": {"Stop": {"matcher": ""}}}',
        b"\xff\xfe",
    ],
    ids=["truncated", "not-an-object", "hooks-not-object", "event-not-list", "not-utf8"],
)
def test_malformed_settings_is_a_typed_error_and_nothing_is_written(
    tmp_path: Path, raw: bytes
) -> None:
    """A settings file Claude Code could not read raises SettingsFileError (a
    ValidationError) naming the file; the file is unchanged and no backup is written."""
    _, settings, store = _project(tmp_path, raw=raw)
    with pytest.raises(SettingsFileError) as info:
        install(settings, store, program=PROGRAM)
    assert str(settings) in str(info.value)
    assert isinstance(info.value, ValidationError) and info.value.path == settings
    assert settings.read_bytes() == raw
    assert not store.exists()
    assert os.listdir(settings.parent) == ["settings.json"]


def test_a_failed_write_leaves_the_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the rename that publishes the settings file fails, the original is untouched
    and no temporary file is left behind."""
    _, settings, store = _project(tmp_path)
    real_replace = os.replace

    def replace(src: str, dst: str | Path) -> None:
        if Path(dst) == settings:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(install_module.os, "replace", replace)
    with pytest.raises(OSError):
        install(settings, store, program=PROGRAM)
    assert settings.read_bytes() == ORIGINAL
    assert os.listdir(settings.parent) == ["settings.json"]


def test_a_linked_settings_file_stays_a_link(tmp_path: Path) -> None:
    """A settings.json that is a symbolic link (a dotfiles checkout) is written through:
    it stays a link, its target gets our hooks, and uninstall restores the target's bytes."""
    _, settings, store = _project(tmp_path, raw=None)
    target = tmp_path / "dotfiles" / "settings.json"
    target.parent.mkdir()
    target.write_bytes(ORIGINAL)
    settings.parent.mkdir()
    settings.symlink_to(target)
    install(settings, store, program=PROGRAM)
    assert settings.is_symlink() and _ours(json.loads(target.read_bytes()), "Stop")
    uninstall(settings, store)
    assert settings.is_symlink() and target.read_bytes() == ORIGINAL


def test_cli_user_install_round_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--user`` changes ~/.claude/settings.json (HOME points at tmp), keeps its backup in
    the global store directory (CORTEXGRAPH_HOME), and uninstall restores the bytes."""
    home, global_dir = tmp_path / "home", tmp_path / "global"
    user_settings = home / ".claude" / "settings.json"
    user_settings.parent.mkdir(parents=True)
    user_settings.write_bytes(ORIGINAL)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CORTEXGRAPH_HOME", str(global_dir))
    assert main(["claude-code", "install", "--user", "--program", PROGRAM, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["action"] == "installed"
    assert (global_dir / BACKUP_NAME).is_file()
    assert _ours(json.loads(user_settings.read_bytes()), "SessionStart")
    assert main(["claude-code", "uninstall", "--user", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["action"] == "restored"
    assert user_settings.read_bytes() == ORIGINAL


def test_cli_project_malformed_exits_1_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI maps a malformed settings file to exit 1 with the file named on stderr."""
    project, settings, _ = _project(tmp_path, raw=b"{oops")
    assert main(["claude-code", "install", "--project", str(project), "--program", "x"]) == 1
    err = capsys.readouterr().err
    assert "SettingsFileError" in err and str(settings) in err
    assert settings.read_bytes() == b"{oops"


def test_cli_project_defaults_to_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --project or --user, install uses ./.claude/settings.json."""
    project, settings, store = _project(tmp_path, raw=None)
    monkeypatch.chdir(project)
    assert main(["claude-code", "install", "--program", PROGRAM]) == 0
    assert settings.is_file() and (store / BACKUP_NAME).is_file()


def test_plugin_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--plugin DIR`` writes the manifest, hooks.json (the same hooks as install) and one
    proactive command file per slash command, each calling its cortexgraph subcommand;
    writing it again changes no byte."""
    plugin = tmp_path / "plugin"
    args = ["claude-code", "install", "--plugin", str(plugin), "--program", PROGRAM, "--json"]
    assert main(args) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_bytes())
    assert manifest["name"] == "cortexgraph-memory" and manifest["version"]
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_bytes())
    assert hooks["hooks"] == hooks_block(PROGRAM)
    assert sorted(os.listdir(plugin / "commands")) == sorted(
        f"{name}.md" for name, _, _ in SLASH_COMMANDS
    )
    for name, _, _ in SLASH_COMMANDS:
        text = (plugin / "commands" / f"{name}.md").read_text(encoding="utf-8")
        front = text.split("---\n")[1]
        assert "Use as a reflex" in front
        assert slash_command_line(name, PROGRAM) in text
    assert "Use as a reflex when earlier context may exist" in (
        plugin / "commands" / "recall.md"
    ).read_text(encoding="utf-8")
    stamps = {f: os.stat(f).st_mtime_ns for f in files}
    assert write_plugin(plugin, program=PROGRAM) == [Path(f) for f in files]
    assert {f: os.stat(f).st_mtime_ns for f in files} == stamps


def test_store_locations(tmp_path: Path) -> None:
    """Project memories live in <project>/.memory/; global ones in ~/.claude/memory/
    unless CORTEXGRAPH_HOME (when not empty) names another directory."""
    project = project_store(tmp_path / "proj")
    assert (project.root, project.actor) == (tmp_path / "proj" / ".memory", "project")
    home = tmp_path / "home"
    assert global_store({}, home=home).root == home / ".claude" / "memory"
    assert global_store({"CORTEXGRAPH_HOME": ""}, home=home).root == home / ".claude" / "memory"
    overridden = global_store({"CORTEXGRAPH_HOME": str(tmp_path / "g")}, home=home)
    assert (overridden.root, overridden.actor) == (tmp_path / "g", "global")
