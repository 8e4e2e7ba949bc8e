"""Progress bars for the ``cortexgraph`` command's long work (export, import, rebuild,
verify, back-fill, migration).

The library reports progress as ``progress(done, total)`` callbacks; :class:`ProgressBar`
draws them as a tqdm bar on stderr, and only when stderr is a terminal and the command was
not asked for ``--json``, so scripts and pipes see nothing of it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["ProgressBar"]


class ProgressBar:
    """A progress bar (tqdm's) on stderr, drawn only when stderr is a terminal and the
    bar is enabled; ``bar(label, done, total)`` starts a new bar for a new label."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self._bar: Any = None  # tqdm.tqdm, imported only when a bar is drawn
        self._label = ""

    def __call__(self, label: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self._bar is None or label != self._label or total != self._bar.total:
            from tqdm import tqdm

            self.finish()
            self._bar = tqdm(total=total, desc=label, file=sys.stderr, dynamic_ncols=True)
            self._label = label
        self._bar.update(done - self._bar.n)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()

    def step(self, label: str) -> Callable[[int, int], None]:
        """The library's ``progress(done, total)`` callback for a bar labelled ``label``."""
        return lambda done, total: self(label, done, total)
