"""Context packing shares renderings and costs between calls (``core.packing._MEMO``): the
bundles are the ones packing computes from scratch."""

from __future__ import annotations

from pathlib import Path

import cortexgraph as cg
from cortexgraph.core import packing
from cortexgraph.core.forms import estimate_tokens


def test_shared_renderings_give_the_bundles_of_a_fresh_packing(tmp_path: Path) -> None:
    """Context bundles with the default estimator (whose renderings and costs are shared
    between calls) equal those with an equivalent estimator that shares nothing, call
    after call, with the query, the budget and the memories changing in between, and a
    memory in the foreground in one call and the background in the next."""
    with cg.open(tmp_path, "tester", sync=False) as cx:
        with cx.batch() as b:
            for i in range(60):
                b.write(cg.Fact(text=f"fact {i} about deploys and the billing api"), at=10**12 + i)
                b.write(cg.Preference(text=f"prefer option {i} for deploys"), at=10**12 + 100 + i)
            b.write(cg.Fact(text="a long fact " + "word " * 600), at=10**12 + 500)
        fresh = lambda text: estimate_tokens(text)  # noqa: E731 - not the default: no sharing
        for query, budget in (
            ("billing api", 2000),
            (None, 2000),
            ("deploys", 400),
            ("billing", 120),
            (None, 60),
        ):
            now = 10**12 + 10_000
            shared = cx.context(query=query, budget_tokens=budget, now=now)
            alone = cx.context(query=query, budget_tokens=budget, now=now, estimator=fresh)
            assert shared == alone and shared.items
        assert packing._MEMO
        cx.update(shared.items[0][0], text="changed after the bundles were packed")
        now = 10**12 + 20_000
        assert cx.context(query="deploys", budget_tokens=400, now=now) == cx.context(
            query="deploys", budget_tokens=400, now=now, estimator=fresh
        )
        # another estimator never reads the shared costs: the same bundle with the cache
        # full of the default's costs and with it empty
        warm = cx.context(query="deploys", budget_tokens=300, now=now, estimator=len)
        packing._MEMO.clear()
        assert warm == cx.context(query="deploys", budget_tokens=300, now=now, estimator=len)
