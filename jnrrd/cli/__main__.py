"""``python -m jnrrd.cli``: the same command line as the ``jnrrd`` console script."""

import sys

from . import main

sys.exit(main())
