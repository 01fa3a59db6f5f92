"""`python -m evaluators.synth ...`: the same command as `python -m evaluators synth ...`.

Kept as a second spelling because the synthesis pipeline is a package of its own; both parse
the same arguments (`pipeline.add_arguments` and the fleet's) and run the same code.
"""

import sys

from evaluators.__main__ import main

if __name__ == "__main__":
    sys.exit(main(["synth", *sys.argv[1:]]))
