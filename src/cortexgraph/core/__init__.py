"""The pure core of cortexgraph.

Nothing in this package performs I/O, reads the clock, draws randomness or looks at the
environment, and nothing here imports the shell (``store``, ``vector``, ``embed``) or its
libraries (lmdb, hnswlib, torch, httpx). ``tests/test_purity.py`` enforces this.
"""
