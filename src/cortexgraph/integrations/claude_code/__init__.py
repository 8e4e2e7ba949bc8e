"""The coding-assistant memory plugin for Claude Code.

- :mod:`.install`: merging its hooks into Claude Code's settings, and undoing it;
- :mod:`.stores`: where it keeps memories (``<project>/.memory/`` and the global
  ``~/.claude/memory/``, or ``CORTEXGRAPH_HOME``);
- :mod:`.hooks`: what ``cortexgraph hook <Event>`` does;
- :mod:`.indexing`: code indexed as prose-code pairs (``cortexgraph index-code``).

Nothing is imported here: a hook starts a fresh interpreter on every call, and each
command loads only the module it runs.
"""
