"""``python -m kuiper.bench --child ...``: the fresh process that ``kuiper bench --memory`` starts per engine."""

from __future__ import annotations

import sys

from .fresh_process import child_main

if len(sys.argv) > 1 and sys.argv[1] == "--child":
    sys.exit(child_main(sys.argv[2:]))
sys.exit("usage: kuiper bench ... (this module runs directly only as a --memory child)")
