"""``python -m earshot.cli ARGS``, or ``python PATH/earshot/cli/__main__.py ARGS``: earshot.

Agents run earshot's hook by this file's path (``earshot install`` writes
``PYTHON THIS-FILE hook AGENT``): the ``earshot`` console script imports
``re`` before anything of earshot (about 6 ms of every hook event here) and
``-m`` imports ``runpy``; by its path the interpreter runs this file alone.
"""

import os
import sys

# Run by its path, this file's directory leads sys.path: modules here must
# not pass for top-level ones.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

from earshot.cli.entry import main

if __name__ == "__main__":
    main()
