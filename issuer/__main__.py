"""``python -m issuer``: the same as ``ldpstream issuer``."""

import sys

from .app import main

sys.exit(main())
