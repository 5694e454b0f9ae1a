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

The ``cryptography`` package does key generation and key (de)serialisation; the blind
steps themselves are modular arithmetic on the key's integers.  Python's integers are
not constant-time, so :func:`blind_sign` also blinds its own exponentiation with a
fresh random base (RFC 9474 §7.1: timing side channels) and recomputes the result from
the public key before answering (a fault check).

RSASSA-PSS verification (:func:`verify`, :class:`PSSVerifier`) has two backends that
give the same answer on every input: ``gmpy2`` (GMP's ``powmod`` for the public
operation ``s^e mod n``, then EMSA-PSS-VERIFY of RFC 8017 §9.1.2 written out here, on
integers and the interpreter's SHA-384) and ``openssl`` (``cryptography``'s ``verify``,
which sets up an OpenSSL PSS context on every call: about 1.25× the CPU of the first
for RSA-2048).  ``auto`` takes ``gmpy2`` when it is installed.  The tests hold them
to agreement on the RFC vectors, random and mutated signatures and messages, and
encoded messages mutated in each of their fields then signed with the raw private key.
Both refuse a signature that is not exactly ``k`` octets long (RFC 8017 §8.1.2 step 1;
OpenSSL alone would accept one whose leading zero octets were cut off).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import importlib
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

_gmpy2: Any
try:
    _gmpy2 = importlib.import_module("gmpy2")
except ImportError:  # pragma: no cover - the openssl backend then
    _gmpy2 = None

__all__ = ["BlindRSAError", "Variant", "RSABSSA_SHA384_PSS_RANDOMIZED",
           "RSABSSA_SHA384_PSSZERO_RANDOMIZED", "RSABSSA_SHA384_PSS_DETERMINISTIC",
           "RSABSSA_SHA384_PSSZERO_DETERMINISTIC", "VARIANTS", "BACKENDS", "prepare",
           "emsa_pss_encode", "emsa_pss_verify", "mgf1", "blind", "blind_sign", "finalize",
           "verify", "PSSVerifier", "default_backend", "i2osp", "os2ip"]


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


def verify(pk: rsa.RSAPublicKey, prepared: bytes, sig: bytes, variant: Variant, *,
           backend: str = "auto") -> bool:
    """RSASSA-PSS-VERIFY (RFC 8017 §8.1.2) with the variant's parameters (``backend``: see
    :class:`PSSVerifier`; to verify many signatures of one key, build one of those)."""
    return PSSVerifier(pk, variant, backend=backend).verify(prepared, sig)


BACKENDS = ("auto", "gmpy2", "openssl")
"""RSASSA-PSS verification backends (see the module docstring)."""


def default_backend() -> str:
    """The backend ``auto`` stands for here: ``gmpy2`` if it is installed, else ``openssl``."""
    return "openssl" if _gmpy2 is None else "gmpy2"


def _builtin_sha384() -> Any:
    """The interpreter's own SHA-384 (``_sha2`` from 3.12, ``_sha512`` before), else
    hashlib's.  The same function; for the one-block messages of EMSA-PSS it costs about
    half of OpenSSL 3's per-call context set-up behind ``hashlib.sha384``."""
    for name in ("_sha2", "_sha512"):
        try:
            return importlib.import_module(name).sha384
        except (ImportError, AttributeError):
            continue
    return hashlib.sha384  # pragma: no cover - a Python built without them


_SHA384 = _builtin_sha384()


def _powmod_list(bases: list[int], e: Any, n: Any) -> list[Any]:
    """``[b^e mod n for b in bases]`` by gmpy2, in one call where it has
    ``powmod_base_list``."""
    many = getattr(_gmpy2, "powmod_base_list", None)
    if many is not None:
        return list(many(bases, e, n))
    return [_gmpy2.powmod(b, e, n) for b in bases]  # pragma: no cover - an older gmpy2


@functools.lru_cache(maxsize=64)
def _pss_layout(em_bits: int, salt_length: int) -> tuple[int, ...] | None:
    """Per (emBits, sLen): (MGF1 blocks, the shift cutting MGF1's output to dbLen octets,
    the mask of DB's low em_bits − 8·hLen − 8 bits, the mask of the salt), or None if
    emLen < hLen + sLen + 2 (EMSA-PSS-VERIFY step 3: nothing is consistent)."""
    em_len = (em_bits + 7) // 8
    if em_len < _HLEN + salt_length + 2:
        return None
    db_len = em_len - _HLEN - 1
    blocks = -(-db_len // _HLEN)
    return (blocks, 8 * (blocks * _HLEN - db_len), (1 << (em_bits - 8 * _HLEN - 8)) - 1,
            (1 << 8 * salt_length) - 1)


_H_MASK = (1 << 8 * _HLEN) - 1
_ZEROS8 = bytes(8)


def emsa_pss_verify(msg: bytes, em: int, em_bits: int, salt_length: int) -> bool:
    """EMSA-PSS-VERIFY (RFC 8017 §9.1.2) with SHA-384 and MGF1-SHA-384, on the encoded
    message as the integer ``em = OS2IP(EM)`` (what RSAVP1 gives).

    ``EM = maskedDB ‖ H ‖ 0xbc`` with ``emLen = ⌈emBits/8⌉`` octets; consistent iff the
    top ``8·emLen − emBits`` bits are zero (this also covers the I2OSP of §8.1.2 2c),
    the last octet is ``0xbc``, ``DB = maskedDB ⊕ MGF1(H, emLen − hLen − 1)`` with those
    top bits cleared is exactly ``0…0 ‖ 0x01 ‖ salt`` (``salt_length`` octets of salt),
    and ``H = SHA-384(0x00⁸ ‖ SHA-384(msg) ‖ salt)``.  On integers: ``DB`` must equal
    ``2^(8·sLen) + salt``.
    """
    layout = _pss_layout(em_bits, salt_length)
    if layout is None:  # step 3
        return False
    blocks, cut, db_mask, salt_mask = layout
    if em >> em_bits or em & 0xFF != 0xBC:  # steps 6 (and 2c of §8.1.2), 4
        return False
    h = ((em >> 8) & _H_MASK).to_bytes(_HLEN, "big")  # step 5
    sha = _SHA384
    if blocks == 5:  # RSA-2048 (dbLen 207): unrolled
        mgf = (sha(h + b"\0\0\0\0").digest() + sha(h + b"\0\0\0\1").digest()
               + sha(h + b"\0\0\0\2").digest() + sha(h + b"\0\0\0\3").digest()
               + sha(h + b"\0\0\0\4").digest())
    else:
        mgf = b"".join([sha(h + i.to_bytes(4, "big")).digest() for i in range(blocks)])
    # steps 7–9: DB = maskedDB ⊕ MGF1(H, dbLen), its top 8·emLen − emBits bits cleared
    db = ((em >> (8 * _HLEN + 8)) ^ (int.from_bytes(mgf, "big") >> cut)) & db_mask
    if db >> (8 * salt_length) != 1:  # step 10: zeros, then 0x01, then the salt
        return False
    salt = (db & salt_mask).to_bytes(salt_length, "big")  # step 11
    # steps 2, 12–14
    return hmac.compare_digest(sha(_ZEROS8 + sha(msg).digest() + salt).digest(), h)


class PSSVerifier:
    """RSASSA-PSS-VERIFY (RFC 8017 §8.1.2) of signatures by one public key, its per-key
    values computed once.

    Parameters
    ----------
    pk : RSAPublicKey
    variant : Variant
        Salt length (SHA-384 and MGF1-SHA-384 always).
    backend : {"auto", "gmpy2", "openssl"}
        ``gmpy2``: ``m = s^e mod n`` by GMP's ``powmod``, then :func:`emsa_pss_verify`;
        ``openssl``: ``cryptography``'s ``verify``; ``auto``: :func:`default_backend`.
        Asking for ``gmpy2`` where it is not installed raises :class:`ImportError`.

    Both refuse (answer False to) a signature of another length than the modulus' ``k``
    octets, an ``s ≥ n`` and anything EMSA-PSS-VERIFY calls inconsistent.
    """

    __slots__ = ("pk", "variant", "backend", "k", "n", "e", "em_bits", "_n", "_e", "_pad",
                 "_hash", "verify", "verify_many")

    def __init__(self, pk: rsa.RSAPublicKey, variant: Variant, *, backend: str = "auto") -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if backend == "auto":
            backend = default_backend()
        if backend == "gmpy2" and _gmpy2 is None:
            raise ImportError("the gmpy2 backend needs the gmpy2 package")
        nums = pk.public_numbers()
        self.pk, self.variant, self.backend = pk, variant, backend
        self.n, self.e = nums.n, nums.e
        self.k = (self.n.bit_length() + 7) // 8
        self.em_bits = self.n.bit_length() - 1
        self._pad, self._hash = variant.pss, hashes.SHA384()
        self._n: Any = None if _gmpy2 is None else _gmpy2.mpz(self.n)
        self._e: Any = None if _gmpy2 is None else _gmpy2.mpz(self.e)
        self.verify = self._verify_gmpy2 if backend == "gmpy2" else self._verify_openssl
        """``verify(msg, sig) -> bool``."""
        self.verify_many = (self._verify_many_gmpy2 if backend == "gmpy2"
                            else self._verify_many_openssl)
        """``verify_many(msgs, sigs) -> [bool]``: the same answers as ``verify`` on each
        pair (gmpy2: the public operations in one call, ≈ 5 % less CPU)."""

    def _verify_gmpy2(self, msg: bytes, sig: bytes) -> bool:
        if len(sig) != self.k:  # §8.1.2 step 1
            return False
        s = int.from_bytes(sig, "big")
        if s >= self.n:  # RSAVP1 step 1: "signature representative out of range"
            return False
        m = int(_gmpy2.powmod(s, self._e, self._n))
        return emsa_pss_verify(msg, m, self.em_bits, self.variant.salt_length)

    def _verify_many_gmpy2(self, msgs: Sequence[bytes], sigs: Sequence[bytes]) -> list[bool]:
        if len(msgs) != len(sigs):
            raise ValueError(f"{len(msgs)} messages for {len(sigs)} signatures")
        n, k = self.n, self.k
        ints = [int.from_bytes(s, "big") if len(s) == k else n for s in sigs]
        take = [i for i, s in enumerate(ints) if s < n]  # the others: §8.1.2 steps 1, 2b
        out = [False] * len(sigs)
        if not take:
            return out
        bases = ints if len(take) == len(ints) else [ints[i] for i in take]
        ems = _powmod_list(bases, self._e, self._n)
        em_bits, s_len = self.em_bits, self.variant.salt_length
        for i, m in zip(take, ems, strict=True):
            out[i] = emsa_pss_verify(msgs[i], int(m), em_bits, s_len)
        return out

    def _verify_many_openssl(self, msgs: Sequence[bytes], sigs: Sequence[bytes]) -> list[bool]:
        if len(msgs) != len(sigs):
            raise ValueError(f"{len(msgs)} messages for {len(sigs)} signatures")
        return [self._verify_openssl(m, s) for m, s in zip(msgs, sigs, strict=True)]

    def _verify_openssl(self, msg: bytes, sig: bytes) -> bool:
        if len(sig) != self.k:  # OpenSSL would take a signature cut of its leading zeros
            return False
        try:
            self.pk.verify(sig, msg, self._pad, self._hash)
        except (InvalidSignature, ValueError):
            return False
        return True


def constant_time_equal(a: bytes, b: bytes) -> bool:
    """Compare secrets without leaking where they differ."""
    return hmac.compare_digest(a, b)
