"""The in-memory tables of a whole-journal replay, and the bulk load that writes them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.store.env import Environment
from cortexgraph.store.memtxn import MemTxn

keys = st.binary(min_size=1, max_size=4)
ops = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), keys, st.one_of(st.none(), st.binary(max_size=3))),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(batches=st.lists(ops, max_size=5), prefix=st.binary(max_size=2))
def test_reads_follow_every_write_and_ordered_reads_are_sorted(
    batches: list[list[tuple[str, bytes, bytes | None]]], prefix: bytes
) -> None:
    """After any mix of puts and deletes (some through apply_mutations, some one by one),
    get answers as a dict model does, and the ordered reads list exactly the model's keys
    with the prefix in byte order, however reads and writes interleave."""
    mem = MemTxn(["a", "b"])
    model: dict[str, dict[bytes, bytes]] = {"a": {}, "b": {}}
    for i, batch in enumerate(batches):
        if i % 2:
            mem.apply_mutations(batch)
        else:
            for table, key, value in batch:
                if value is None:
                    mem.delete(table, key)
                else:
                    mem.put(table, key, value)
        for table, key, value in batch:
            if value is None:
                model[table].pop(key, None)
            else:
                model[table][key] = value
        for table in ("a", "b"):
            expected = sorted((k, v) for k, v in model[table].items() if k.startswith(prefix))
            assert list(mem.iter_items(table, prefix)) == expected
            assert list(mem.iter_prefix(table, prefix)) == [k for k, _ in expected]
            assert mem.prefix_range(table, prefix) == (
                [k for k, _ in expected],
                [v for _, v in expected],
            )
            assert mem.sorted_items(table) == sorted(model[table].items())
            assert all(mem.get(table, k) == v for k, v in model[table].items())
            assert mem.count(table) == len(model[table])


def test_a_bulk_load_out_of_order_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    """put_sorted appends: keys out of order (or below the table's last key) are a typed
    error, and the aborted transaction leaves the table as it was."""
    env = Environment(tmp_path / "a", "a", create=True, readonly=False, map_size=1 << 24,
                      sync=False, hash_name=None)  # fmt: skip
    try:
        txn = env.begin_write(replay=True)
        with pytest.raises(cg.CortexError):
            txn.put_sorted("heads", [(b"b", b"1"), (b"a", b"2")])
        txn.abort()
        with env.read() as read:
            assert read.count("heads") == 0
        txn = env.begin_write(replay=True)
        txn.put_sorted("heads", [(b"a", b"1"), (b"b", b"2")])
        txn.commit()
        with env.read() as read:
            assert read.get("heads", b"a") == b"1" and read.get("heads", b"b") == b"2"
    finally:
        env.close()
