"""``python -m evaluators.cdn install|resolve``: see `evaluators.cdn.mirror`."""

import sys

from evaluators.cdn.mirror import _main

sys.exit(_main())
