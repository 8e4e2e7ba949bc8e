"""A sub-agent's scope from its environment: the bundle its parent handed it, verified.

A parent (for example :class:`cortexgraph.integrations.agents.AgentRunner`) writes a scope
bundle (:meth:`Cortex.scope`) to a file and starts the child with two variables:

- ``CORTEXGRAPH_SCOPE``: the path of the bundle file;
- ``CORTEXGRAPH_ROOT``: the OverallRoot the bundle must commit to, as 64 hex digits.

:func:`scope_from_env` reads both and returns :func:`cortexgraph.verify_scope`'s
:class:`~cortexgraph.ScopeView`. It opens no store: the child needs only the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .errors import StorageError, ValidationError

if TYPE_CHECKING:
    from .scope import ScopeView

__all__ = ["ROOT_VARIABLE", "SCOPE_VARIABLE", "scope_from_env"]

SCOPE_VARIABLE = "CORTEXGRAPH_SCOPE"
ROOT_VARIABLE = "CORTEXGRAPH_ROOT"


def scope_from_env(environ: Mapping[str, str] | None = None) -> ScopeView:
    """Read and verify the scope bundle named by the environment.

    Args:
        environ: the variables to read (default: ``os.environ``).

    Returns:
        The verified, read-only view of the bundle.

    Raises:
        ValidationError: a variable is missing or the root is not 64 hex digits (``field``
            names the variable).
        StorageError: the bundle file cannot be read.
        VerificationError: the bundle does not check out against the root (a flipped bit,
            truncation, trailing bytes, another store's root).
    """
    from .scope import verify_scope

    env = os.environ if environ is None else environ
    path = env.get(SCOPE_VARIABLE, "")
    if not path:
        raise ValidationError("is not set: the path of a scope bundle file", field=SCOPE_VARIABLE)
    text = env.get(ROOT_VARIABLE, "").strip()
    if not text:
        raise ValidationError(
            "is not set: the trusted OverallRoot as 64 hex digits", field=ROOT_VARIABLE
        )
    try:
        root = bytes.fromhex(text)
    except ValueError:
        root = b""
    if len(root) != 32:
        raise ValidationError(f"{text[:80]!r} is not 64 hex digits", field=ROOT_VARIABLE)
    try:
        with open(path, "rb") as handle:
            blob = handle.read()
    except OSError as error:
        raise StorageError(
            f"cannot read the scope bundle {path!r} named by {SCOPE_VARIABLE}: {error}",
            operation="scope_from_env",
        ) from None
    return verify_scope(blob, root)
