"""The surface: ranked memories of the project and global stores, written into
``.claude/cortex-memory.local.md`` and cached.

- **Ranking.** Every active memory of a surfaced category is a candidate (at most
  :data:`CANDIDATES_PER_QUERY` per category tag and per type, taken by the library's
  salience, so the work stays bounded at any store size), ranked by the seed's profile
  (:mod:`.ranking`) with the branch bonus for the current git branch. Decay is evaluated
  at the time of the stores' last journal entry, not the wall clock, so the surface is a
  function of the stores and the branch alone: the same stores and branch give the same
  bytes on any machine at any time.
- **Cache.** ``.memory/surface-cache/<sha256(branch:cwd)>.json`` holds the surface with the
  generation of each store it was computed from (:func:`cortexgraph.store_generation`).
  It is served for 24 hours while both generations are unchanged: any write to either
  store (a new memory, an access record, a compaction) invalidates it.
- **Lock.** The surface file and the cache are written under ``.memory/locks/surface.lock``,
  a PID lock file: created exclusively, holding the writer's PID. A lock whose PID no
  longer runs, or older than :data:`LOCK_STALE_S`, is stale and taken over; a live one is
  waited for (up to :data:`LOCK_WAIT_S`). Each file is written atomically (a synced
  temporary file renamed over it), so a reader never sees a torn surface.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import cortexgraph as cg

from .categories import CATEGORIES, category_of
from .install import write_atomic
from .ranking import (
    SEED_PROFILE,
    RankingProfile,
    SurfaceLine,
    compose_surface,
    decayed_confidence,
    rank_ppm,
)
from .stores import StoreLocation

__all__ = [
    "CACHE_TTL_S",
    "END_MARK",
    "START_MARK",
    "SURFACE_FILE",
    "LockTimeout",
    "cached_surface",
    "compute_surface",
    "pid_lock",
    "refresh_surface",
    "surface_block",
    "write_surface_file",
]

SURFACE_FILE = Path(".claude") / "cortex-memory.local.md"
START_MARK = "<!-- CORTEX_MEMORY_START -->"
END_MARK = "<!-- CORTEX_MEMORY_END -->"
CACHE_DIR = "surface-cache"
CACHE_TTL_S = 24 * 3600
LOCK_FILE = Path("locks") / "surface.lock"
LOCK_WAIT_S = 10.0
LOCK_STALE_S = 120.0
CANDIDATES_PER_QUERY = 100
#: the namespace of extraction cursors (bookkeeping, never surfaced)
CURSOR_NS = "extraction"
_SURFACED_TYPES = ("fact", "constraint", "pattern", "event", "preference", "goal")


class LockTimeout(Exception):
    """Another live process held the surface lock for longer than the wait."""


# -- ranking the stores' memories ----------------------------------------------------------


def _last_time(cx: cg.Cortex) -> int:
    seq = cx.seq
    if seq == 0:
        return 0
    return next(iter(cx.journal(since=seq - 1))).at


def compute_surface(
    stores: list[tuple[str, cg.Cortex]],
    branch: str | None,
    profile: RankingProfile = SEED_PROFILE,
) -> str:
    """The surface of ``stores`` (``(label, handle)`` pairs, the project's first) on
    ``branch``; ``""`` when nothing is worth surfacing."""
    now = max((_last_time(cx) for _, cx in stores), default=0)
    lines: list[SurfaceLine] = []
    for label, cx in stores:
        seen: set[bytes] = set()
        queries = [cg.Q.tag(name) for name, c in CATEGORIES.items() if c.budget]
        queries += [cg.Q.type(name) for name in _SURFACED_TYPES]
        for query in queries:
            found = cx.find(query & ~cg.Q.ns(CURSOR_NS), limit=CANDIDATES_PER_QUERY, now=now)
            for hit in found:
                if hit.uri.id in seen:
                    continue
                seen.add(hit.uri.id)
                memory = hit.record.memory
                category = category_of(memory.tags, memory.type_name)
                if category is None or not CATEGORIES[category].budget:
                    continue
                signals = cx.salience(hit.uri, now=now)
                centrality = signals.factors["centrality"]
                confidence = decayed_confidence(
                    memory.confidence,
                    category,
                    age_ms=now - hit.record.at,
                    pinned=memory.pinned,
                    access_count=signals.access_count,
                    centrality=centrality,
                )
                rank = rank_ppm(
                    profile,
                    confidence=confidence,
                    priority=memory.priority,
                    centrality=centrality,
                    frequency=signals.factors["frequency"],
                    same_branch=branch is not None
                    and memory.source is not None
                    and memory.source.branch == branch,
                )
                lines.append(
                    SurfaceLine(
                        category,
                        rank,
                        memory.summary or memory.text,
                        f"{label}:{hit.uri.id.hex()}",
                        "" if label == "project" else label,
                    )
                )
    return compose_surface(lines)


# -- the cache ----------------------------------------------------------------------------


def cache_key(branch: str | None, cwd: Path) -> str:
    """``sha256(branch:cwd)`` in hex (the branch is empty outside a repository)."""
    return hashlib.sha256(f"{branch or ''}:{cwd}".encode()).hexdigest()


def _generations(locations: list[StoreLocation]) -> list[int]:
    return [cg.store_generation(where.root, where.actor) for where in locations]


def cached_surface(
    project_root: Path, key: str, locations: list[StoreLocation], profile: RankingProfile
) -> str | None:
    """The cached surface for ``key`` if it is under 24 hours old and was computed from
    the stores as they are now (same generations) with ``profile``; else None."""
    path = project_root / CACHE_DIR / f"{key}.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        age = time.time() - float(record["written"])
        if (
            0 <= age < CACHE_TTL_S
            and record["profile"] == profile.name
            and record["generations"] == _generations(locations)
            and isinstance(record["surface"], str)
        ):
            return str(record["surface"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no cache, or one that is not ours: computed afresh
    return None


def _write_cache(
    project_root: Path, key: str, generations: list[int], profile: RankingProfile, surface: str
) -> None:
    folder = project_root / CACHE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time()
    record = {
        "generations": generations,
        "profile": profile.name,
        "surface": surface,
        "written": now,
    }
    write_atomic(folder / f"{key}.json", json.dumps(record, ensure_ascii=False).encode())
    for old in folder.glob("*.json"):  # other branches' entries past their day
        with contextlib.suppress(OSError):
            if now - old.stat().st_mtime > CACHE_TTL_S:
                old.unlink()


# -- the lock and the file ----------------------------------------------------------------


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it runs, as another user
    return True


def _stale(path: Path) -> bool:
    """Whether the lock at ``path`` was left by a process that is gone (or is too old)."""
    try:
        text = path.read_text(encoding="ascii").strip()
        age = time.time() - path.stat().st_mtime
    except (OSError, UnicodeDecodeError):
        return False  # vanished meanwhile (the next try takes it) or unreadable
    if age > LOCK_STALE_S:
        return True
    if not text.isdigit():
        return age > 1.0  # a holder writes its PID right after creating the file
    return not _running(int(text))


@contextlib.contextmanager
def pid_lock(path: Path, *, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold the PID lock file ``path`` (see the module doc).

    Raises:
        LockTimeout: a live process held it for ``wait_s`` seconds.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if _stale(path):
                # take it over by renaming it away: of several processes that found it
                # stale, one rename succeeds; the others find the file gone or fresh
                aside = path.with_name(f"{path.name}.stale.{os.getpid()}")
                with contextlib.suppress(OSError):
                    os.rename(path, aside)
                    os.unlink(aside)
                continue
            if time.monotonic() > deadline:
                raise LockTimeout(f"{path} is held by a running process") from None
            time.sleep(0.02)
            continue
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
        finally:
            os.close(fd)
        break
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def surface_block(surface: str) -> str:
    """The surface between its markers."""
    return f"{START_MARK}\n{surface}\n{END_MARK}"


def write_surface_file(path: Path, surface: str) -> None:
    """Put ``surface`` between the markers of ``path``, keeping the rest, atomically; no
    write at all when the file already holds it."""
    block = surface_block(surface)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    start, end = old.find(START_MARK), old.find(END_MARK)
    if start >= 0 and end > start:
        new = old[:start] + block + old[end + len(END_MARK) :]
    else:
        new = (old.rstrip("\n") + "\n\n" if old.strip() else "") + block + "\n"
    if new != old:
        write_atomic(path, new.encode("utf-8"))


def refresh_surface(
    cwd: Path,
    branch: str | None,
    project: StoreLocation,
    global_: StoreLocation,
    *,
    profile: RankingProfile = SEED_PROFILE,
    use_cache: bool = True,
) -> str:
    """The surface for ``cwd`` on ``branch``, from the cache when it is valid, else
    computed from the stores that exist; the surface file and the cache are brought up to
    date under the lock. Returns ``""`` when there is nothing to surface."""
    if not project.exists():
        return ""  # a project the plugin never learned from: nothing is written into it
    locations = [where for where in (project, global_) if where.exists()]
    key = cache_key(branch, cwd)
    with pid_lock(project.root / LOCK_FILE):
        surface = cached_surface(project.root, key, locations, profile) if use_cache else None
        if surface is None:
            generations = _generations(locations)  # before reading: a later write shows
            with contextlib.ExitStack() as stack:
                opened = [
                    (
                        "project" if where == project else "global",
                        stack.enter_context(cg.open(where.root, where.actor, readonly=True)),
                    )
                    for where in locations
                ]
                surface = compute_surface(opened, branch, profile)
            _write_cache(project.root, key, generations, profile, surface)
        if surface:
            write_surface_file(cwd / SURFACE_FILE, surface)
    return surface
