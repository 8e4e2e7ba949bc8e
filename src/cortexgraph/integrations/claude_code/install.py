"""Installing the plugin's hooks into Claude Code, taking them out again, and writing the
plugin directory.

Claude Code reads hooks from ``settings.json`` (``<project>/.claude/settings.json`` for one
project, ``~/.claude/settings.json`` for the user) in this form::

    {"hooks": {"SessionStart": [{"matcher": "", "hooks": [
        {"type": "command", "command": "/abs/cortexgraph hook SessionStart", "timeout": 10}]}],
     ...}}

:func:`install` merges one such matcher group per event of :data:`HOOK_EVENTS` into the
file and keeps every other key and hook. :func:`uninstall` takes them out again.

Invariants:

- I1 (idempotent) installing when our hooks are already there writes nothing: not the
  settings file, not the backup.
- I2 (exact undo) uninstall after install gives back the original bytes of the settings
  file, or no file when there was none. To make that hold, install keeps the original
  bytes in a backup record (``claude-code-settings.json`` in the store directory: the
  project's ``.memory/`` or the global one) with the sha256 of what it wrote. Uninstall
  restores the original only while the file is still exactly what install wrote; when
  someone edited it since, restoring would lose their edit, so uninstall instead removes
  exactly our groups and keeps the rest.
- I3 (nothing partial) every write is a temporary file in the same directory renamed over
  the target; a malformed settings file raises :class:`SettingsFileError` before anything
  is written.

Our groups are recognised by their command: one hook whose command names ``cortexgraph``
and ends with ``hook <Event>`` for the event it is registered under.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs

from ... import __version__
from ...errors import ValidationError

__all__ = [
    "BACKUP_NAME",
    "HOOK_EVENTS",
    "InstallReport",
    "PLUGIN_NAME",
    "SLASH_COMMANDS",
    "SettingsFileError",
    "default_program",
    "hook_command",
    "hooks_block",
    "install",
    "slash_command_line",
    "uninstall",
    "write_atomic",
    "write_plugin",
]

#: Each hook event the plugin registers, with its timeout in seconds. The extraction
#: events read a whole transcript and may call an extractor, so they get the most time.
HOOK_EVENTS: tuple[tuple[str, int], ...] = (
    ("SessionStart", 30),
    ("UserPromptSubmit", 10),
    ("Stop", 120),
    ("SessionEnd", 120),
    ("PreCompact", 120),
)

BACKUP_NAME = "claude-code-settings.json"


class SettingsFileError(ValidationError):
    """A settings file is not what Claude Code reads (not JSON, or the wrong shape).

    Attributes:
        path: the file.
    """

    def __init__(self, path: Path, message: str) -> None:
        self.path = path
        super().__init__(message, field=str(path))


@attrs.frozen
class InstallReport:
    """What :func:`install` or :func:`uninstall` did.

    Attributes:
        settings: the settings file.
        changed: whether the settings file was written (or removed).
        action: ``installed``, ``unchanged``, ``restored`` (the original bytes are back),
            ``removed`` (our groups were taken out of an edited file) or ``absent``.
    """

    settings: Path
    changed: bool
    action: str


def default_program() -> str:
    """The command line that runs cortexgraph, as absolute as this interpreter allows.

    The ``cortexgraph`` console script next to this interpreter when there is one, else
    ``<python> -m cortexgraph.cli``: hooks run from Claude Code's environment, where the
    virtual environment is not on ``PATH``.
    """
    script = Path(sys.executable).parent / "cortexgraph"
    if script.is_file():
        return shlex.quote(str(script.absolute()))
    return f"{shlex.quote(str(Path(sys.executable).absolute()))} -m cortexgraph.cli"


def hook_command(event: str, program: str) -> str:
    """The command Claude Code runs for ``event``: ``<program> hook <event>``."""
    return f"{program} hook {event}"


def _group(event: str, timeout: int, program: str) -> dict[str, Any]:
    command = {"type": "command", "command": hook_command(event, program), "timeout": timeout}
    return {"matcher": "", "hooks": [command]}


def hooks_block(program: str) -> dict[str, list[dict[str, Any]]]:
    """The ``hooks`` mapping the plugin registers: one matcher group per event."""
    return {event: [_group(event, timeout, program)] for event, timeout in HOOK_EVENTS}


def _is_ours(group: Any, event: str) -> bool:
    if not isinstance(group, dict):
        return False
    hooks = group.get("hooks")
    if not isinstance(hooks, list) or len(hooks) != 1 or not isinstance(hooks[0], dict):
        return False
    command = hooks[0].get("command")
    return (
        isinstance(command, str) and "cortexgraph" in command and command.endswith(f" hook {event}")
    )


# -- reading and writing files ------------------------------------------------------------


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _parse(path: Path, raw: bytes | None) -> dict[str, Any]:
    """The settings object in ``raw`` (an empty or missing file is ``{}``)."""
    if raw is None or not raw.strip():
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SettingsFileError(path, f"not valid JSON ({exc}); nothing was written") from None
    if not isinstance(data, dict):
        raise SettingsFileError(path, "the top level is not a JSON object; nothing was written")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsFileError(path, '"hooks" is not a JSON object; nothing was written')
    for event, _ in HOOK_EVENTS:
        if not isinstance(hooks.get(event, []), list):
            raise SettingsFileError(path, f'"hooks.{event}" is not a list; nothing was written')
    return data


def _dump(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _sha256(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def write_atomic(path: Path, raw: bytes) -> None:
    """Write ``raw`` to ``path`` by renaming a synced temporary file over it (I3).

    A symbolic link is written through (its target is replaced), so that a settings file
    kept elsewhere and linked in stays a link.
    """
    path = path.resolve() if path.is_symlink() else path
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    fd, scratch = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(scratch, mode)
        os.replace(scratch, path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise


def _load_backup(backup: Path, settings: Path) -> dict[str, Any] | None:
    """The backup record for ``settings``, or None (absent, unreadable or another file's)."""
    raw = _read(backup)
    if raw is None:
        return None
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(record, dict) or record.get("settings") != str(settings):
        return None
    return record


def _drop_backup(backup: Path) -> None:
    """Remove the backup record, and its directory when that leaves it empty."""
    backup.unlink(missing_ok=True)
    try:
        backup.parent.rmdir()
    except OSError:  # not empty (a store lives there) or already gone
        pass


# -- install and uninstall ----------------------------------------------------------------


def install(settings: Path, backup_dir: Path, *, program: str) -> InstallReport:
    """Merge the plugin's hooks into ``settings``, keeping every other key and hook.

    Args:
        settings: the ``settings.json`` to change (created when missing).
        backup_dir: where the backup record of the original bytes lives.
        program: the command line that runs cortexgraph (see :func:`default_program`).

    Returns:
        What was done; ``action`` is ``unchanged`` when the hooks were already there (I1).

    Raises:
        SettingsFileError: ``settings`` is not a JSON object of the expected shape.
        OSError: the file or the backup could not be written.
    """
    settings = settings.absolute()
    raw = _read(settings)
    data = _parse(settings, raw)
    merged = json.loads(json.dumps(data))
    hooks = merged.setdefault("hooks", {})
    for event, group in hooks_block(program).items():
        groups = hooks.get(event, [])
        if groups.count(group[0]) == 1 and sum(_is_ours(g, event) for g in groups) == 1:
            continue
        hooks[event] = [g for g in groups if not _is_ours(g, event)] + group
    if merged == data and raw is not None:
        return InstallReport(settings, False, "unchanged")
    new_raw = _dump(merged)
    backup = backup_dir / BACKUP_NAME
    record = _load_backup(backup, settings)
    if record is None or raw is None or _sha256(raw) != record.get("installed_sha256"):
        # Restoring bytes that already hold our hooks would not undo the install, so a
        # file that has them (edited after an earlier install) is undone by removal only.
        has_ours = any(
            _is_ours(g, event)
            for event, _ in HOOK_EVENTS
            for g in data.get("hooks", {}).get(event, [])
        )
        record = {
            "settings": str(settings),
            "existed": raw is not None,
            "parent_existed": settings.parent.is_dir(),
            "original_b64": None if raw is None or has_ours else base64.b64encode(raw).decode(),
        }
    record["installed_sha256"] = _sha256(new_raw)
    # The backup first: a crash between the two writes leaves a record whose hash matches
    # no file, which uninstall treats as an edited file (it removes our groups only).
    write_atomic(backup, _dump(record))
    write_atomic(settings, new_raw)
    return InstallReport(settings, True, "installed")


def uninstall(settings: Path, backup_dir: Path) -> InstallReport:
    """Take the plugin's hooks out of ``settings`` (I2), and drop the backup record.

    Raises:
        SettingsFileError: ``settings`` was edited since install and is now malformed.
        OSError: the file could not be written.
    """
    settings = settings.absolute()
    backup = backup_dir / BACKUP_NAME
    raw = _read(settings)
    record = _load_backup(backup, settings)
    if raw is None:
        _drop_backup(backup)
        return InstallReport(settings, False, "absent")
    if record is not None and _sha256(raw) == record.get("installed_sha256"):
        if not record.get("existed"):
            settings.unlink()
            if not record.get("parent_existed", True) and not any(settings.parent.iterdir()):
                settings.parent.rmdir()
            _drop_backup(backup)
            return InstallReport(settings, True, "restored")
        if isinstance(record.get("original_b64"), str):
            write_atomic(settings, base64.b64decode(record["original_b64"]))
            _drop_backup(backup)
            return InstallReport(settings, True, "restored")
    data = _parse(settings, raw)
    hooks = data.get("hooks", {})
    changed = False
    for event, _ in HOOK_EVENTS:
        groups = hooks.get(event, [])
        kept = [g for g in groups if not _is_ours(g, event)]
        if len(kept) != len(groups):
            changed = True
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if changed and not hooks:
        del data["hooks"]
    if changed:
        write_atomic(settings, _dump(data))
    _drop_backup(backup)
    return InstallReport(settings, changed, "removed" if changed else "unchanged")


# -- the plugin directory -----------------------------------------------------------------

PLUGIN_NAME = "cortexgraph-memory"

#: Each slash command: its name (the file ``commands/<name>.md``), its argument hint, and
#: its description. The descriptions are worded so that Claude reaches for the command
#: unprompted. What each runs: :func:`slash_command_line`.
SLASH_COMMANDS: tuple[tuple[str, str, str], ...] = (
    (
        "recall",
        "<query> [--branch B] [--keyword]",
        "Recall what earlier sessions learned about this project: decisions, gotchas,"
        " patterns, progress and indexed code. Use as a reflex when earlier context may"
        " exist: before answering about the code, its design or past work, and before"
        " changing code not yet read in this session.",
    ),
    (
        "remember",
        "<text> [--type T] [--priority N] [--global] [--pin]",
        "Save a decision, preference, pattern or gotcha for future sessions. Use as a"
        " reflex when the user states a decision or preference, or when something is"
        " learned that a later session would otherwise have to rediscover.",
    ),
    (
        "forget",
        "<id | query>",
        "Archive a memory that is wrong or obsolete (a fuzzy query lists candidates"
        " instead of guessing). Use as a reflex when a surfaced or recalled memory"
        " contradicts what is now known.",
    ),
    (
        "index-code",
        "<path | dir>",
        "Index source files as prose-code pairs, so that recall finds code by what it"
        " does. Use as a reflex when earlier context may exist about code about to be"
        " changed, and after large edits.",
    ),
    (
        "consolidate",
        "[--promote A B | --drop A B | --dry-run]",
        "Merge near-duplicate memories and list the borderline ones and suggested links"
        " for review. Use as a reflex when recall returns repeated or conflicting memories.",
    ),
    (
        "inspect",
        "",
        "Show the memory stores' statistics, recent extractions and health. Use as a"
        " reflex when memories seem missing, stale or wrong.",
    ),
)


def slash_command_line(name: str, program: str) -> str:
    """The command line the slash command ``name`` runs, before its arguments:
    ``<program> claude-code <name>``, except ``index-code``, the general command pointed
    at the project store (``.memory/``, actor ``project``; the command file runs it
    from the project directory)."""
    if name == "index-code":
        return f"{program} index-code --root .memory --actor project"
    return f"{program} claude-code {name}"


def _command_markdown(name: str, hint: str, description: str, program: str) -> str:
    line = slash_command_line(name, program)
    run = f"{line} $ARGUMENTS" if hint else line
    front = [f"description: {json.dumps(description)}"]
    if hint:
        front.append(f"argument-hint: {json.dumps(hint)}")
    return (
        "---\n"
        + "\n".join(front)
        + "\n---\n\n"
        + "Run this command with the Bash tool, from the project directory:\n\n"
        + f"```sh\n{run}\n```\n\n"
        + "Then use what it prints; if it fails, say so in one line and carry on.\n"
    )


def write_plugin(directory: Path, *, program: str) -> list[Path]:
    """Write a Claude Code plugin directory: manifest, hooks and slash commands.

    ``.claude-plugin/plugin.json`` (the manifest), ``hooks/hooks.json`` (the same hooks
    :func:`install` merges into a settings file) and ``commands/<name>.md`` for each of
    :data:`SLASH_COMMANDS`. Other files in ``directory`` are left alone; each file is
    written atomically, and writing the same plugin again changes no byte.

    Args:
        directory: the plugin's root (created when missing).
        program: the command line that runs cortexgraph (see :func:`default_program`).

    Returns:
        The files written, in order.

    Raises:
        OSError: a file could not be written.
    """
    manifest = {
        "name": PLUGIN_NAME,
        "version": __version__,
        "description": "Persistent, verifiable project memory for Claude Code, on cortexgraph:"
        " learns from each session's transcript and surfaces ranked memories at the next.",
    }
    hooks = {
        "description": "cortexgraph memory: surface at session start, recall on each prompt,"
        " extract at stop, session end and compaction.",
        "hooks": hooks_block(program),
    }
    files: list[tuple[Path, bytes]] = [
        (directory / ".claude-plugin" / "plugin.json", _dump(manifest)),
        (directory / "hooks" / "hooks.json", _dump(hooks)),
    ]
    for name, hint, description in SLASH_COMMANDS:
        text = _command_markdown(name, hint, description, program)
        files.append((directory / "commands" / f"{name}.md", text.encode("utf-8")))
    for path, raw in files:
        if _read(path) != raw:
            write_atomic(path, raw)
    return [path for path, _ in files]
