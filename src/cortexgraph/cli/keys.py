"""``cortexgraph keygen``: make an Ed25519 key for signed checkpoints, and the key files the
other commands read (``snapshot --sign``, ``scope export --sign``, ``verify --key``,
``scope verify --key``).

``keygen KEYFILE`` writes the signing key to ``KEYFILE`` (created with permissions 0600,
never over an existing file) and its verifier key to ``KEYFILE.pub``, both one line in the
text form of Go's ``sumdb/note`` keys (:mod:`cortexgraph.signing`). Keys are kept out of
the stores: a ``KEYFILE`` inside an actor's store directory is refused. The library never
reads key files; these helpers do, for the commands.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from .output import Output

if TYPE_CHECKING:
    from ..signing import SigningKey, VerifierKey

__all__ = ["add_keys_parser", "cmd_keygen", "read_signing_key", "read_verifier_key"]


def add_keys_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``keygen`` subcommand to ``sub`` (the parser's subparsers action)."""
    p = sub.add_parser(
        "keygen",
        parents=[common],
        help="make an Ed25519 key for signed checkpoints (KEYFILE and KEYFILE.pub)",
        description="Writes the signing key to KEYFILE (mode 0600) and the verifier key to"
        " KEYFILE.pub; refuses to overwrite either. Needs the 'sign' extra.",
    )
    p.add_argument("keyfile", metavar="KEYFILE", help="where to write the signing key")
    p.add_argument(
        "--name",
        default=None,
        help="the key's name, the origin line of its checkpoints (default:"
        " cortexgraph/<actor>); no spaces or '+'",
    )
    p.set_defaults(func=cmd_keygen)


def _inside_a_store(path: Path) -> Path | None:
    for parent in path.resolve().parents:
        if (parent / "data.mdb").exists():
            return parent
    return None


def cmd_keygen(args: argparse.Namespace, out: Output) -> int:
    """Generate a key; exit 1 on a bad name, 2 when a target exists or cannot be written."""
    from ..signing import SigningKey

    target = Path(args.keyfile)
    public = target.with_name(target.name + ".pub")
    store = _inside_a_store(target)
    if store is not None:
        raise ValidationError(
            f"{target} is inside the store {store}; keep keys outside the stores",
            field="keyfile",
        )
    for path in (target, public):
        if path.exists():
            raise FileExistsError(f"{path} exists; refusing to overwrite a key")
    key = SigningKey.generate(args.name or f"cortexgraph/{args.actor}")
    # O_EXCL: a file that appears meanwhile is not overwritten; 0600 from the start, so the
    # secret is never readable by others, whatever the umask
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as stream:
        os.fchmod(stream.fileno(), 0o600)
        stream.write(key.to_text() + "\n")
    fd = os.open(public, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "w", encoding="ascii") as stream:
        stream.write(key.verifier.to_text() + "\n")
    verifier = key.verifier.to_text()
    out.emit(
        {"key": str(target), "public": str(public), "name": key.name, "verifier_key": verifier},
        f"wrote {target} (secret, mode 0600) and {public}:\n{verifier}",
    )
    return 0


def read_signing_key(path: str) -> SigningKey:
    """The signing key in the file ``path``.

    Raises:
        OSError: the file cannot be read. ValidationError: it is not a signing key.
    """
    from ..signing import SigningKey

    return SigningKey.from_text(Path(path).read_text(encoding="ascii", errors="replace"))


def read_verifier_key(value: str) -> VerifierKey:
    """The verifier key in the file ``value``, or ``value`` itself when it is key text
    (``<name>+<key ID>+<key>``) and no such file exists.

    Raises:
        OSError: the file cannot be read. ValidationError: it is not a verifier key.
    """
    from ..signing import VerifierKey

    path = Path(value)
    if not path.exists() and value.count("+") >= 2:
        return VerifierKey.from_text(value)
    return VerifierKey.from_text(path.read_text(encoding="ascii", errors="replace"))
