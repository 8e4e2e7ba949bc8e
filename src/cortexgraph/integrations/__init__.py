"""Integrations of cortexgraph into the runtimes and frameworks agents run in, built on the
public API only (the outer layer)."""
