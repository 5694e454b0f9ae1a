"""``python -m ldpctl``: the ``ldpstream`` command (what the local stack starts)."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
