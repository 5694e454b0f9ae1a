"""RSA blind signatures (RFC 9474, RSABSSA with SHA-384).

The protocol between a client and a signer::

    client                                  signer (holds sk)
    ------                                  ------
    prepared = Prepare(msg)
    blinded, inv = Blind(pk, prepared)  ──▶ blind_sig = BlindSign(sk, blinded)
    sig = Finalize(pk, prepared, blind_sig, inv)  ◀──
    Verify(pk, prepared, sig)  (plain RSASSA-PSS, RFC 8017 §8.1.2)

with ``Blind``: ``m = OS2IP(EMSA-PSS-ENCODE(msg, bits(n) - 1))``, ``r`` uniform in
``[1, n)``, ``blinded = m · r^e mod n``, ``inv = r⁻¹ mod n``; ``BlindSign``:
``s = blinded^d mod n`` (checked by ``s^e = blinded``); ``Finalize``:
``sig = blind_sig · inv mod n``, kept only if it verifies.  The signer sees
``m · r^e``, uniformly distributed whatever ``m``, so it cannot link ``sig`` to the
session that produced it (RFC 9474 §7.3, blindness).

Four variants (RFC 9474 §5): salt of the hash length (``PSS``) or empty
(``PSSZERO``); the message used as is (``Deterministic``) or after a 32-byte random
prefix (``Randomized``).  Privacy Pass token type 2 (RFC 9578 §6) uses
:data:`RSABSSA_SHA384_PSS_DETERMINISTIC`.

The ``cryptography`` package does key generation, key (de)serialisation and the
RSASSA-PSS verification (OpenSSL); the blind steps themselves are modular
arithmetic on the key's integers.  Python's integers are not constant-time, so
:func:`blind_sign` also blinds its own exponentiation with a fresh random base
(RFC 9474 §7.1: timing side channels) and recomputes the result from the public
key before answering (a fault check).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

__all__ = ["BlindRSAError", "Variant", "RSABSSA_SHA384_PSS_RANDOMIZED",
           "RSABSSA_SHA384_PSSZERO_RANDOMIZED", "RSABSSA_SHA384_PSS_DETERMINISTIC",
           "RSABSSA_SHA384_PSSZERO_DETERMINISTIC", "VARIANTS", "prepare", "emsa_pss_encode",
           "mgf1", "blind", "blind_sign", "finalize", "verify", "i2osp", "os2ip"]


class BlindRSAError(ValueError):
    """A step of the protocol failed (message too long, not invertible, bad signature…)."""


@dataclass(frozen=True)
class Variant:
    """One RSABSSA variant: SHA-384, MGF1-SHA-384, this salt length and preparation."""

    name: str
    salt_length: int
    randomized: bool

    @property
    def pss(self) -> padding.PSS:
        """The ``cryptography`` padding that verifies this variant's signatures."""
        return padding.PSS(mgf=padding.MGF1(hashes.SHA384()), salt_length=self.salt_length)


RSABSSA_SHA384_PSS_RANDOMIZED = Variant("RSABSSA-SHA384-PSS-Randomized", 48, True)
RSABSSA_SHA384_PSSZERO_RANDOMIZED = Variant("RSABSSA-SHA384-PSSZERO-Randomized", 0, True)
RSABSSA_SHA384_PSS_DETERMINISTIC = Variant("RSABSSA-SHA384-PSS-Deterministic", 48, False)
RSABSSA_SHA384_PSSZERO_DETERMINISTIC = Variant("RSABSSA-SHA384-PSSZERO-Deterministic", 0,
                                               False)
VARIANTS = {v.name: v for v in (RSABSSA_SHA384_PSS_RANDOMIZED,
                                RSABSSA_SHA384_PSSZERO_RANDOMIZED,
                                RSABSSA_SHA384_PSS_DETERMINISTIC,
                                RSABSSA_SHA384_PSSZERO_DETERMINISTIC)}

_HLEN = 48  # SHA-384


def i2osp(x: int, length: int) -> bytes:
    """Integer → big-endian bytes of exactly ``length`` (RFC 8017 §4.1)."""
    if x < 0 or x >= 1 << (8 * length):
        raise BlindRSAError("integer too large")
    return x.to_bytes(length, "big")


def os2ip(b: bytes) -> int:
    """Big-endian bytes → integer (RFC 8017 §4.2)."""
    return int.from_bytes(b, "big")


def mgf1(seed: bytes, length: int) -> bytes:
    """MGF1 with SHA-384 (RFC 8017 §B.2.1)."""
    out = bytearray()
    for counter in range(-(-length // _HLEN)):
        out += hashlib.sha384(seed + counter.to_bytes(4, "big")).digest()
    return bytes(out[:length])


def emsa_pss_encode(msg: bytes, em_bits: int, salt: bytes) -> bytes:
    """EMSA-PSS-ENCODE with SHA-384 and MGF1-SHA-384 (RFC 8017 §9.1.1)."""
    m_hash = hashlib.sha384(msg).digest()
    em_len = -(-em_bits // 8)
    if em_len < _HLEN + len(salt) + 2:
        raise BlindRSAError("encoding error: the modulus is too small")
    h = hashlib.sha384(b"\0" * 8 + m_hash + salt).digest()
    db = b"\0" * (em_len - len(salt) - _HLEN - 2) + b"\x01" + salt
    masked = bytearray(a ^ b for a, b in zip(db, mgf1(h, em_len - _HLEN - 1), strict=True))
    masked[0] &= 0xFF >> (8 * em_len - em_bits)
    return bytes(masked) + h + b"\xbc"


def prepare(msg: bytes, variant: Variant, *, prefix: bytes | None = None) -> bytes:
    """``PrepareIdentity`` (the message as is) or ``PrepareRandomize`` (32 random bytes,
    or ``prefix`` for tests, before it) per the variant (RFC 9474 §4.1)."""
    if not variant.randomized:
        return msg
    if prefix is None:
        prefix = secrets.token_bytes(32)
    if len(prefix) != 32:
        raise BlindRSAError("the randomizing prefix must be 32 bytes")
    return prefix + msg


def _public(pk: rsa.RSAPublicKey) -> tuple[int, int, int]:
    nums = pk.public_numbers()
    return nums.n, nums.e, (nums.n.bit_length() + 7) // 8


def blind(pk: rsa.RSAPublicKey, prepared: bytes, variant: Variant, *,
          salt: bytes | None = None, r: int | None = None) -> tuple[bytes, bytes]:
    """``Blind(pk, msg)`` (RFC 9474 §4.2): ``(blinded_msg, inv)``, each ``modulus_len``
    bytes.  ``salt`` and ``r`` are drawn from the OS CSPRNG unless given (test vectors)."""
    n, e, k = _public(pk)
    if salt is None:
        salt = secrets.token_bytes(variant.salt_length)
    if len(salt) != variant.salt_length:
        raise BlindRSAError(f"the salt must be {variant.salt_length} bytes")
    m = os2ip(emsa_pss_encode(prepared, n.bit_length() - 1, salt))
    if math.gcd(m, n) != 1:
        raise BlindRSAError("invalid input: the encoded message is not invertible mod n")
    if r is None:
        while True:
            r = 1 + secrets.randbelow(n - 1)
            if math.gcd(r, n) == 1:
                break
    try:
        inv = pow(r, -1, n)
    except ValueError:
        raise BlindRSAError("invalid blind: not invertible mod n") from None
    z = m * pow(r, e, n) % n
    return i2osp(z, k), i2osp(inv, k)


def blind_sign(sk: rsa.RSAPrivateKey, blinded_msg: bytes) -> bytes:
    """``BlindSign(sk, blinded_msg)`` (RFC 9474 §4.3): ``s = m^d mod n`` by the CRT,
    itself blinded by a random base, and checked by ``s^e = m`` before it is returned."""
    priv = sk.private_numbers()
    pub = priv.public_numbers
    n, e = pub.n, pub.e
    k = (n.bit_length() + 7) // 8
    if len(blinded_msg) != k:
        raise BlindRSAError(f"the blinded message must be {k} bytes")
    m = os2ip(blinded_msg)
    if m >= n:
        raise BlindRSAError("message representative out of range")
    # base blinding: sign m·u^e, then divide by u (the timing of the exponentiation then
    # does not depend on m)
    while True:
        u = 1 + secrets.randbelow(n - 1)
        if math.gcd(u, n) == 1:
            break
    c = m * pow(u, e, n) % n
    p, q = priv.p, priv.q
    s1 = pow(c % p, priv.dmp1, p)
    s2 = pow(c % q, priv.dmq1, q)
    h = priv.iqmp * (s1 - s2) % p
    s = (s2 + q * h) * pow(u, -1, n) % n
    if pow(s, e, n) != m:
        raise BlindRSAError("signing failure")
    return i2osp(s, k)


def finalize(pk: rsa.RSAPublicKey, prepared: bytes, blind_sig: bytes, inv: bytes,
             variant: Variant) -> bytes:
    """``Finalize(pk, msg, blind_sig, inv)`` (RFC 9474 §4.4): the unblinded signature, or
    :class:`BlindRSAError` if it does not verify."""
    n, _, k = _public(pk)
    if len(blind_sig) != k or len(inv) != k:
        raise BlindRSAError(f"unexpected input size: the blind signature must be {k} bytes")
    sig = i2osp(os2ip(blind_sig) * os2ip(inv) % n, k)
    if not verify(pk, prepared, sig, variant):
        raise BlindRSAError("invalid signature")
    return sig


def verify(pk: rsa.RSAPublicKey, prepared: bytes, sig: bytes, variant: Variant) -> bool:
    """RSASSA-PSS-VERIFY (RFC 8017 §8.1.2) with the variant's parameters."""
    try:
        pk.verify(sig, prepared, variant.pss, hashes.SHA384())
    except (InvalidSignature, ValueError):
        return False
    return True


def constant_time_equal(a: bytes, b: bytes) -> bool:
    """Compare secrets without leaking where they differ."""
    return hmac.compare_digest(a, b)
