"""``python -m kuiper``: the ``kuiper`` command, for environments where the console script is not on PATH."""

import sys

from .cli import main

sys.exit(main())
