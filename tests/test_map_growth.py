"""Map growth: a store opened with a 64 KiB map grows on demand and loses nothing.

The writer doubles the LMDB map on ``MapFullError`` and replays the batch's entries in a
new transaction (``Batch._regrow``). These tests force that inside one batch and across
batches, and compare the result byte for byte with the same operations done on a store
opened with the default map size.

The map size is not public, so growth is read from the size of ``data.mdb``. LMDB cannot
write a page beyond the map, so a file over ``2**k * 64 KiB`` proves ``k`` doublings. And
the map only doubles when a transaction runs out of it, so after a batch that grew it the
map is less than twice the file: a file that later passes four times that size proves two
more doublings.
"""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest

import cortexgraph as cg

TINY = 65536  # the smallest map_size cg.open accepts
T0 = 1_700_000_000_000
KIB = 1024


class Script:
    """Writes the same operations into any store; remembers the text of every version."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.at = T0
        self.texts: dict[cg.MemoryURI, str] = {}

    def tick(self) -> int:
        self.at += 1000
        return self.at

    def big_text(self, label: str, kib: int = 200) -> str:
        """``kib`` KiB of incompressible text (LMDB stores it as overflow pages)."""
        noise = base64.b64encode(self.rng.randbytes(kib * KIB * 3 // 4)).decode()
        return f"{label} ✓ {noise}"

    def write(
        self, b: cg.Cortex | cg.Batch, memory: cg.Memory, ns: str = "default"
    ) -> cg.MemoryURI:
        uri = b.write(memory, ns=ns, at=self.tick())
        self.texts[uri] = memory.text
        return uri

    def update(self, b: cg.Cortex | cg.Batch, uri: cg.MemoryURI, text: str) -> cg.MemoryURI:
        new = b.update(uri, text=text, at=self.tick())
        self.texts[new] = text
        return new


def data_size(cx: cg.Cortex) -> int:
    return (cx.path / "data.mdb").stat().st_size


def run_growth_script(root: Path, map_size: int) -> tuple[dict[str, str], list[int], Script]:
    """Run the growth script on a fresh store; return its digests, data.mdb sizes, script."""
    s = Script(seed=2024)
    sizes: list[int] = []
    with cg.open(root, "grow", map_size=map_size, sync=False) as cx:
        # 1. One batch of 1.4 MiB of memories (journal and versions both hold each body,
        #    so 2.8 MiB of pages): the map grows several times inside the batch.
        with cx.batch() as b:
            first = s.write(b, cg.Fact(text=s.big_text("first"), tags=["Big"]))
            for i in range(5):
                cls = cg.Fact if i % 2 else cg.Event
                s.write(b, cls(text=s.big_text(f"batch-1 {i}")), ns="bulk")
                s.write(b, cg.Fact(text=f"small {i}", tags=[f"n{i}"]))
            ref = s.write(b, cg.ArtifactRef(text="blob", content=s.big_text("content")))
            assert s.texts[first] == b.resolve(first).memory.text  # read after regrowth
        sizes.append(data_size(cx))

        # 2. Single operations, each its own batch: the map grows between batches.
        bigs = [s.write(cx, cg.Pattern(text=s.big_text(f"single {i}")), ns="ns2") for i in range(8)]
        v2 = s.update(cx, first, s.big_text("first v2"))
        s.update(cx, v2, s.big_text("first v3"))
        cx.update_head(first, version=2, at=s.tick())
        s.update(cx, ref, "blob, now small")
        cx.tombstone(bigs[0], reason="too big", at=s.tick())
        sizes.append(data_size(cx))

        # 3. A batch of updates, each a new big version.
        with cx.batch() as b:
            for uri in bigs[1:]:
                s.update(b, uri, s.big_text(f"{uri.id_hex} v2"))
        sizes.append(data_size(cx))

    # 4. Reopen with the tiny map again (LMDB takes the file's size) and keep growing.
    with cg.open(root, "grow", map_size=map_size, sync=False) as cx:
        with cx.batch() as b:
            for i in range(8):
                s.write(b, cg.Constraint(text=s.big_text(f"after reopen {i}", kib=300)), ns="ns3")
        sizes.append(data_size(cx))

        journal = [seq for seq, _ in cx.journal_bytes()]
        assert list(range(1, len(journal) + 1)) == journal
        for uri, text in s.texts.items():
            assert text == cx.resolve(uri).memory.text
        assert cx.resolve(first.head).version == 2
        return cx.table_digests(), sizes, s


def test_tiny_map_grows_inside_and_across_batches(tmp_path: Path) -> None:
    """Writes that overflow a 64 KiB map many times over commit in full, and equal the same
    writes on a default-size map, byte for byte.

    The map doubles at least five times inside the first batch and at least twice more
    after it (across batches, and after a reopen with the tiny map); every version
    resolves to its text, the journal is dense, and every table digest matches.
    """
    tiny, sizes, script = run_growth_script(tmp_path / "tiny", TINY)
    default, _, _ = run_growth_script(tmp_path / "default", 1 << 30)

    assert sizes[0] > 32 * TINY  # >= 5 doublings inside the first batch
    assert sizes[-1] > 4 * sizes[0]  # >= 2 more after it (see the module docstring)
    assert sizes == sorted(sizes)
    assert len(script.texts) == 38  # versions written, each resolved to its text
    assert default == tiny


@pytest.mark.parametrize(
    "kib",
    [5, 11, 17, 23, 29, 41, 53, 63],
)
def test_growth_at_any_point_of_a_batch(tmp_path: Path, kib: int) -> None:
    """A batch commits whole on a tiny map whichever of its operations overflows it.

    Texts of 5 to 63 KiB move the overflow between the first and the last operation; the
    result must equal the same batch on a default-size map, byte for byte.
    """
    digests, sizes = [], []
    for name, map_size in (("tiny", TINY), ("default", 1 << 30)):
        s = Script(seed=kib)
        with cg.open(tmp_path / name, "grow", map_size=map_size, sync=False) as cx:
            with cx.batch() as b:
                uris = [s.write(b, cg.Fact(text=s.big_text(f"{i}", kib=kib))) for i in range(3)]
                s.update(b, uris[0], s.big_text("v2", kib=kib))
                b.tombstone(uris[1], at=s.tick())
            assert [seq for seq, _ in cx.journal_bytes()] == [1, 2, 3, 4, 5]
            for uri, text in s.texts.items():
                assert text == cx.resolve(uri).memory.text
            digests.append(cx.table_digests())
            sizes.append(data_size(cx))
    assert sizes[0] > TINY  # the tiny map grew
    assert digests[0] == digests[1]


class ResizingFakeEnv:
    """A fake of py-lmdb's Environment for a map another process grows ``times`` times in a
    row: ``begin`` fails with MDB_MAP_RESIZED while a growth is not adopted, and each
    ``set_mapsize(0)`` adopts one growth only (the writer grew it again meanwhile)."""

    def __init__(self, real: object, times: int) -> None:
        self.real, self.left, self.adopted = real, times, 0

    def begin(self, *args: object, **kwargs: object) -> object:
        import lmdb

        if self.left:
            raise lmdb.MapResizedError("mdb_txn_begin: MDB_MAP_RESIZED (fake)")
        return self.real.begin(*args, **kwargs)  # type: ignore[attr-defined]

    def set_mapsize(self, size: int) -> None:
        self.adopted += 1
        self.left = max(0, self.left - 1)
        self.real.set_mapsize(size)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


@pytest.mark.parametrize("times", [1, 3, 7])
def test_a_read_adopts_a_map_grown_again_and_again(tmp_path: Path, times: int) -> None:
    """Another process growing the map while this one adopts it: a transaction that meets
    MDB_MAP_RESIZED several times in a row adopts each time and begins (one adoption was
    not enough under a writer that keeps growing the map)."""
    with cg.open(tmp_path, "agent", sync=False) as cx:
        uri = cx.write(cg.Fact(text="kept"), at=1)
        env = cx._handle.env
        fake = ResizingFakeEnv(env._env, times)
        env._env = fake
        try:
            assert cx.resolve(uri).memory.text == "kept"
        finally:
            env._env = fake.real
        assert (fake.left, fake.adopted) == (0, times)


def test_a_map_that_never_stops_growing_is_a_storage_error(tmp_path: Path) -> None:
    """When every attempt meets another growth, the read gives up with a StorageError
    naming the store, instead of retrying for ever."""
    from cortexgraph.store.env import ADOPT_ATTEMPTS

    with cg.open(tmp_path, "agent", sync=False) as cx:
        uri = cx.write(cg.Fact(text="kept"), at=1)
        env = cx._handle.env
        fake = ResizingFakeEnv(env._env, ADOPT_ATTEMPTS + 5)
        env._env = fake
        try:
            with pytest.raises(cg.StorageError, match="MAP_RESIZED"):
                cx.resolve(uri)
        finally:
            env._env = fake.real
        assert fake.adopted == ADOPT_ATTEMPTS  # every attempt after the first adopted first


def test_a_rebuild_that_outgrows_the_map_grows_it_and_loads_whole(tmp_path: Path) -> None:
    """A rebuild writes every derived table again in one transaction while the old pages
    are still held, so it can need twice the map a store uses: it grows the map and loads
    again (E2), and the result is the incremental state byte for byte."""
    with cg.open(tmp_path, "agent", sync=False) as cx, cx.batch() as b:
        for i in range(600):
            b.write(cg.Fact(text=f"memory {i} about the blue deploy cluster", tags=[f"t{i % 7}"]),
                    at=1_700_000_000_000 + i)  # fmt: skip
    with cg.open(tmp_path, "agent", sync=False) as cx:
        digests = cx.table_digests()
        before = cx._env.map_size()
    # reopen with the smallest map the file allows: the rebuild must grow it
    with cg.open(tmp_path, "agent", sync=False, map_size=TINY) as cx:
        small = cx._env.map_size()
        assert cx.rebuild() == 600
        assert cx._env.map_size() > small
        assert cx.table_digests() == digests
    assert before >= small
    assert cg.verify(tmp_path, "agent").ok
