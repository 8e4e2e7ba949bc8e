"""Fill the file system under a store until a batch fails, then free space and check.

    python disk_full_child.py DIR

``DIR`` is on a small file system of its own (the test mounts a tmpfs there). The script
creates a store in ``DIR/store``, commits a first batch, fills the file system with a filler
file until less than ``LEFT`` bytes remain, then commits batches of memories tagged
``batch<n>`` until one fails. It prints one JSON line: the error's type and message, the
last committed seq and batch. Then it deletes the filler, reopens the store and checks that
the failed batch is absent, every committed batch whole, that ``verify`` passes and that a
new write commits; the second JSON line reports that.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import cortexgraph as cg

LEFT = 1 << 20
PER_BATCH = 40
T0 = 1_700_000_000_000


def fill(path: Path) -> None:
    with open(path, "wb") as out:
        chunk = b"\0" * (64 << 10)
        while True:
            stat = os.statvfs(path.parent)
            if stat.f_bavail * stat.f_frsize <= LEFT + len(chunk):
                break
            out.write(chunk)
            out.flush()


def main(directory: Path) -> None:
    root = directory / "store"
    clock = cg.ManualClock(T0)
    cx = cg.open(root, "a", clock=clock, sync=True)
    with cx.batch() as b:
        for j in range(PER_BATCH):
            b.write(cg.Fact(text=f"before the disk filled {j}", tags=["batch0"]))
    fill(directory / "filler")
    committed, seq, error = 0, cx.seq, None
    for n in range(1, 200):
        try:
            with cx.batch() as b:
                for j in range(PER_BATCH):
                    text = f"batch {n} item {j} " + "payload " * 500
                    b.write(cg.Fact(text=text, tags=[f"batch{n}"]))
        except Exception as exc:  # the test checks what it was
            error = exc
            break
        committed, seq = n, cx.seq
    print(json.dumps({
        "error": None if error is None else type(error).__name__,
        "message": str(error),
        "typed": isinstance(error, cg.CortexError),
        "committed": committed,
        "seq": seq,
    }), flush=True)
    try:
        cx.close()
    except cg.CortexError:
        pass
    (directory / "filler").unlink()
    with cg.open(root, "a", clock=clock, sync=True) as again:
        counts = [len(again.find(cg.Q.tag(f"batch{n}"), limit=1000)) for n in range(committed + 2)]
        after = again.seq
        extra = again.write(cg.Fact(text="written after space was freed"))
        readable = again.resolve(extra).memory.text
    report = cg.verify(root, "a")
    print(json.dumps({
        "counts": counts,
        "seq_after_reopen": after,
        "readable": readable,
        "verify_ok": report.ok,
        "problems": list(report.actors[0].problems),
    }), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
