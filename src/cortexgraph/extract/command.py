"""``CommandExtractor``: extraction by a command-line model, such as ``claude -p``.

The prompt (:func:`~cortexgraph.core.extraction.build_prompt`) goes to the command's
standard input; its standard output is parsed by
:func:`~cortexgraph.core.extraction.parse_candidates`, which tolerates code fences and
prose around the JSON and skips malformed candidates (the returned :class:`Candidates`
lists them). A timeout, a command that cannot start, a non-zero exit or an answer with no
JSON array raise :class:`~cortexgraph.errors.ExtractionError`: nothing is extracted, so
nothing is written.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from ..core.extraction import ExtractionInput, build_prompt, parse_candidates
from ..errors import ExtractionError, ValidationError
from .protocol import Candidates, check_input, check_timeout

__all__ = ["CommandExtractor"]

_STDERR_SHOWN = 500


class CommandExtractor:
    """Runs ``command`` once per chunk, prompt on stdin, candidates parsed from stdout.

    Args:
        command: the program and its arguments (default ``["claude", "-p"]``); run
            without a shell.
        timeout: seconds the command may take for one chunk (> 0, at most a day).

    Raises:
        ValidationError: an empty command, a non-string argument or a bad timeout.
    """

    def __init__(self, command: Sequence[str] = ("claude", "-p"), *, timeout: float = 300.0):
        if isinstance(command, str) or not command:
            raise ValidationError("must be a non-empty list of strings", field="command")
        if not all(type(arg) is str and "\0" not in arg for arg in command) or not command[0]:
            raise ValidationError("must be strings without NUL characters", field="command")
        self.command = tuple(command)
        self.timeout = check_timeout(timeout)

    def __repr__(self) -> str:
        return f"CommandExtractor({list(self.command)!r}, timeout={self.timeout})"

    def extract(self, source: ExtractionInput) -> Candidates:
        """The candidates the command finds in ``source``.

        Raises:
            ExtractionError: the command could not start, timed out, exited non-zero
                (``status`` is its exit status), wrote output that is not UTF-8, or wrote
                no JSON array of candidates.
        """
        prompt = build_prompt(check_input(source))
        name = self.command[0]
        try:
            done = subprocess.run(
                self.command,
                input=prompt.encode("utf-8"),
                capture_output=True,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ExtractionError(f"{name} timed out after {self.timeout:g} s") from None
        except OSError as error:
            raise ExtractionError(f"{name} could not be run: {error}") from None
        if done.returncode != 0:
            stderr = done.stderr.decode("utf-8", "replace").strip()[-_STDERR_SHOWN:]
            raise ExtractionError(
                f"{name} exited with status {done.returncode}: {stderr or '(no stderr)'}",
                status=done.returncode,
            )
        try:
            answer = done.stdout.decode("utf-8")
        except UnicodeDecodeError:
            raise ExtractionError(f"{name} wrote output that is not UTF-8") from None
        result = parse_candidates(answer)
        return Candidates(result.candidates, skipped=result.skipped)
