"""The I/O shell around LMDB: environments, tables and write transactions.

This is the only package that writes bytes to disk. ``cortexgraph.core`` computes what to
write; :class:`~cortexgraph.store.env.Environment` and
:class:`~cortexgraph.store.env.WriteTxn` write it.
"""
