"""`python -m aissim serve|attach ...`: the simulator without the console script (tests, demos)."""

import sys

from aissim.cli import main

sys.exit(main(sys.argv[1:]))
