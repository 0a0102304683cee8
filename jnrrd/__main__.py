"""``python -m jnrrd``: the same command line as the ``jnrrd`` console script."""

import sys

from .cli import main

sys.exit(main())
