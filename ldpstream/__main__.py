"""``python -m ldpstream``: the ``ldpstream`` command, kept for those who run it this way.

An alias of ``python -m ldpctl``: the CLI lives on the top floor (:mod:`ldpctl.cli`), and
this file is the one place of the shared layer that names it; nothing imports this file
(``tests/test_layering.py`` holds it to that).
"""

from __future__ import annotations

import sys

from ldpctl.cli import main

sys.exit(main())
