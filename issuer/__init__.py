"""``ldpstream issuer``: Privacy Pass token issuance (RFC 9578 type 2) for the devices of a
fleet, at most a collection's quota per device and window (docs/privacy-pass.md)."""
