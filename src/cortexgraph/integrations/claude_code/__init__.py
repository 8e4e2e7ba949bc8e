"""The coding-assistant memory plugin for Claude Code: installing its hooks, the stores it
keeps (``<project>/.memory/`` and the global ``~/.claude/memory/``, or ``CORTEXGRAPH_HOME``),
and indexing code as prose-code pairs."""
