"""``python -m gateway``: the same as ``ldpstream gateway``."""

import sys

from ldpstream.settings import ConfigError

from .app import main

try:
    sys.exit(main())
except ConfigError as exc:
    print(f"ldpstream gateway: configuration error: {exc}", file=sys.stderr)
    sys.exit(2)
