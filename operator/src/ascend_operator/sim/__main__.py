"""`python -m ascend_operator.sim serve ...`: the simulator without going through aisctl (tests, demos)."""

import sys

from ascend_operator.sim.cli import main

sys.exit(main(sys.argv[1:]))
