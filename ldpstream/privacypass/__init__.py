"""Privacy Pass for ldpstream: blind RSA (RFC 9474), token type 2 (RFC 9578), the
``PrivateToken`` HTTP scheme (RFC 9577) and how tokens bind (collection, window).

Shared by the issuer (``issuer/``), the gateway (redemption) and the Python SDK
(``producer/``): see docs/privacy-pass.md.
"""
