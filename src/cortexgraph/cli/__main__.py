"""``python -m cortexgraph.cli``: the ``cortexgraph`` command."""

import sys

from . import main

sys.exit(main())
