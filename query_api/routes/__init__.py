"""One router per resource: collections, estimates (and their SSE stream), operations."""

from __future__ import annotations

from .attributes import router as attributes
from .collections import router as collections
from .estimates import router as estimates
from .fleet import router as fleet
from .operations import router as operations
from .series import router as series
from .setvalued import router as setvalued
from .stream import router as stream

__all__ = ["attributes", "collections", "estimates", "fleet", "operations", "series",
           "setvalued", "stream"]
