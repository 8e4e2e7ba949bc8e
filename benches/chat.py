"""The chat memory's turn assembly at scale, against the SQLite history window it replaces.

Usage (``PYTHONPATH`` names the source tree that is timed)::

    PYTHONPATH=src .venv/bin/python benches/chat.py [--n 100000] [--channels 20] [--calls 300]

``--n`` messages (about 60 tokens each) are appended over ``--channels`` channels, in
batches of 1,000 (``append_many``, ``sync=False``), with ten remembered facts and one
identity document. Then ``--calls`` turns, cycling over the channels, are timed:

- ``assemble``: ``ChatMemory.assemble(channel, 2000)``, the whole layered context of a
  2,000-token turn (system floor, foreground window, background lines);
- ``assemble + to_messages``: the same, rendered for Anthropic as canonical JSON bytes;
- baseline, ``SQLite window``: the seed runtime's read of the same foreground window from
  a SQLite table of the same messages, indexed on ``(channel, timestamp)``
  (``ORDER BY timestamp DESC LIMIT 20``), in a file database in the same directory.

Reported: p50 and p95 in milliseconds, and the tokens of the assembled context. Nothing
here fails on timing; the target is p95 <= 20 ms for ``assemble``.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import cortexgraph as cg
from _report import environment, markdown_table, percentile, progress
from cortexgraph.integrations.chat import ChatMemory, render_json

T0 = 1_767_571_200_000
WORDS = [
    "deploy", "billing", "service", "login", "safari", "migration", "postgres", "cache",
    "queue", "worker", "token", "api", "schema", "index", "cluster", "retry", "timeout",
    "budget", "ledger", "invoice", "refund", "lunch", "meeting", "review",
]


def build(root: Path, n: int, channels: int) -> list[tuple[str, str, str, str, int, None]]:
    rng = random.Random(7)
    return [
        (
            f"ch{i % channels}",
            "user" if i % 3 else "assistant",
            f"user{i % 7}",
            " ".join(rng.choice(WORDS) for _ in range(45)) + f" #{i}",
            T0 + i * 1000,
            None,
        )
        for i in range(n)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--channels", type=int, default=20)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cg-chat-bench-"))
    env = environment(args.n, root)
    messages = build(root, args.n, args.channels)
    now = messages[-1][4] + 1
    cx = cg.open(root, "bot", clock=cg.ManualClock(now), sync=False, map_size=1 << 33)
    cx.write(cg.Preference(text="You are Hal, a terse assistant.", tags=["identity"],
                           pinned=True), ns="chat", at=T0)
    chat = ChatMemory(cx)
    for i in range(10):
        chat.remember(f"Remembered fact number {i} about the {WORDS[i]} service.", at=T0 + i)
    start = time.perf_counter()
    for offset in range(0, args.n, 1000):
        chat.append_many(messages[offset : offset + 1000])
        if offset % 20_000 == 0:
            progress(f"appended {offset:,} messages")
    append_rate = args.n / (time.perf_counter() - start)

    db = sqlite3.connect(root / "session.sqlite")
    db.execute("CREATE TABLE session (id INTEGER PRIMARY KEY, role TEXT, channel TEXT,"
               " sender_id TEXT, content TEXT, timestamp INTEGER)")
    db.execute("CREATE INDEX by_channel ON session (channel, timestamp)")
    db.executemany("INSERT INTO session (channel, role, sender_id, content, timestamp)"
                   " VALUES (?, ?, ?, ?, ?)", [m[:5] for m in messages])
    db.commit()

    def sqlite_window(channel: str) -> object:
        rows = db.execute("SELECT role, sender_id, content, timestamp FROM session WHERE"
                          " channel = ? ORDER BY timestamp DESC LIMIT 20", (channel,)).fetchall()
        return rows[::-1]

    cases = {
        "assemble": lambda channel: chat.assemble(channel, 2000, now=now),
        "assemble + to_messages": lambda channel: render_json(
            chat.assemble(channel, 2000, now=now).to_messages("anthropic")),
        "SQLite window (baseline)": sqlite_window,
    }
    times: dict[str, list[float]] = {}
    for name, case in cases.items():
        case("ch0")  # warm up: the first read of a fresh handle loads the column index
        times[name] = []
        for i in range(args.calls):
            channel = f"ch{i % args.channels}"
            begin = time.perf_counter()
            case(channel)
            times[name].append((time.perf_counter() - begin) * 1000)
    tokens = chat.assemble("ch0", 2000, now=now).tokens
    print(f"chat memory: {args.n:,} messages over {args.channels} channels, "
          f"{args.calls} turns of a 2,000-token budget (ms)\n")
    base = percentile(times["SQLite window (baseline)"], 50)
    rows = [
        [name, f"{percentile(t, 50):.2f}", f"{percentile(t, 95):.2f}",
         f"{percentile(t, 50) / base:.1f}x"]
        for name, t in times.items()
    ]
    print(markdown_table(["case", "p50", "p95", "p50 vs SQLite"], rows, {1, 2, 3}))
    print(f"\ncontext tokens {tokens}; append_many {append_rate:,.0f} messages/s; "
          f"load average {env['load_avg_1min_start']} at the start")
    cx.close()
    db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
