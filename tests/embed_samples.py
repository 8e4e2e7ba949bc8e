"""What the embedder tests share: paraphrase pairs, their cosines, and a fresh interpreter
with the network refused.

Each sentence of one pair is unrelated to the sentences of the other pairs, so a cosine
within a pair can be compared with every cosine across pairs.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

# Paraphrase pairs in the vocabulary of agent memories.
PARAPHRASES = [
    ("The API is deployed by Argo CD", "Argo CD deploys the API"),
    ("Never run database migrations from CI", "Database migrations must not be run from CI"),
    ("The user prefers tabs over spaces", "User preference: tabs instead of spaces"),
    ("Tests are run with pytest in parallel", "We run the tests in parallel using pytest"),
    ("The login page crashes on Safari", "Safari crashes when opening the login page"),
    ("Store secrets in the vault, not in env files", "Secrets belong in the vault"),
    ("Deployment happens every Friday", "We deploy on Fridays"),
    ("Alice owns the billing service", "The billing service is owned by Alice"),
]

# Paraphrases that share (almost) no words: only a model can match these.
SEMANTIC_PARAPHRASES = [
    ("How do I reset my password?", "I forgot my login credentials"),
    ("The car would not start this morning", "My automobile failed to turn on today"),
    ("The server ran out of memory", "The machine exhausted its RAM"),
    ("She is a physician at the hospital", "She works as a doctor in a clinic"),
    ("Stock prices fell sharply", "Share values dropped a lot on the market"),
]

# The start of a script for run_python: every socket connection and name lookup raises, so
# whatever the script imports afterwards provably works offline.
REFUSE_NETWORK = """
import socket

def refuse(*args, **kwargs):
    raise RuntimeError(f"network access attempted: {args!r}")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
"""


def pair_cosines(vectors: np.ndarray, n_pairs: int) -> tuple[list[float], list[float]]:
    """Cosines within each pair (rows 2i, 2i+1) and across pairs."""
    para = [float(vectors[2 * i] @ vectors[2 * i + 1]) for i in range(n_pairs)]
    unrelated = [
        float(vectors[a] @ vectors[b])
        for a, b in itertools.combinations(range(2 * n_pairs), 2)
        if a // 2 != b // 2
    ]
    return para, unrelated


def flat(pairs: list[tuple[str, str]]) -> list[str]:
    """The pairs' sentences in order: pair i is rows 2i and 2i+1."""
    return [text for pair in pairs for text in pair]


def run_python(code: str, env: dict[str, str], timeout: float = 180) -> str:
    """Run ``code`` in a fresh interpreter and return its stdout (failing on a non-zero exit)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
