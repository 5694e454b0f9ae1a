"""``python -m aggregator``: run one aggregator worker (settings from LDP_… variables)."""

from __future__ import annotations

import sys

from .app import main

sys.exit(main())
