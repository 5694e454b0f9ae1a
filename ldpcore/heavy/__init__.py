"""Heavy hitters over domains too large to enumerate (64-bit keys, hashed strings).

``pem``: the prefix-extending method of Wang, Li & Jha ("Locally Differentially Private
Heavy Hitter Identification", IEEE TDSC 2019), over local hashing with a public seed pool
so that the server keeps fixed-size sufficient statistics.
"""

from __future__ import annotations

from .pem import PEM, key_of

__all__ = ["PEM", "key_of"]
