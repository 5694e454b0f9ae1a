"""Privacy Pass tokens of type 2 (Blind RSA 2048, RFC 9578 §6) and their HTTP carriage
(RFC 9577).

Structures (TLS presentation language, big-endian)::

    struct {                               struct {
      uint16_t token_type;                   uint16_t token_type = 0x0002;
      opaque issuer_name<1..2^16-1>;         uint8_t  truncated_token_key_id;
      opaque redemption_context<0..32>;      uint8_t  blinded_msg[Nk];
      opaque origin_info<0..2^16-1>;       } TokenRequest;            (259 bytes)
    } TokenChallenge;
                                           struct { uint8_t blind_sig[Nk]; } TokenResponse;
    struct {
      uint16_t token_type = 0x0002;
      uint8_t  nonce[32];
      uint8_t  challenge_digest[32];       challenge_digest = SHA-256(TokenChallenge)
      uint8_t  token_key_id[32];           token_key_id = SHA-256(SPKI of the key)
      uint8_t  authenticator[Nk];          RSABSSA-SHA384-PSS-Deterministic signature of
    } Token;                    (354 bytes)   the 98 bytes before it
    (Nk = 256)

The issuer key is published as a DER ``SubjectPublicKeyInfo`` with the RSASSA-PSS
algorithm identifier (RFC 5756: SHA-384, MGF1-SHA-384, salt 48), byte for byte as in
the RFC 9578 test vectors (:func:`spki_der`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import secrets
import struct
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric import rsa

from . import blindrsa

__all__ = ["TOKEN_TYPE", "NK", "TOKEN_LEN", "TOKEN_REQUEST_LEN", "TokenError",
           "TokenChallenge", "Token", "TokenRequest", "ClientState", "spki_der",
           "public_key_from_spki", "token_key_id", "begin_request", "finalize_token",
           "issue", "verify_token", "b64url", "b64url_decode", "parse_private_token_auth",
           "authorization_header", "www_authenticate"]

TOKEN_TYPE = 0x0002
NK = 256
TOKEN_LEN = 2 + 32 + 32 + 32 + NK
TOKEN_REQUEST_LEN = 2 + 1 + NK
VARIANT = blindrsa.RSABSSA_SHA384_PSS_DETERMINISTIC

_U16 = struct.Struct(">H")
# AlgorithmIdentifier { id-RSASSA-PSS, RSASSA-PSS-params { sha384, mgf1(sha384), 48 } }
# (DER, the hash identifiers without NULL parameters, as in RFC 9578's vectors)
_SHA384_ID = bytes.fromhex("300b0609608648016503040202")
_PSS_ALG = (bytes.fromhex("303d06092a864886f70d01010a3030")
            + b"\xa0\x0d" + _SHA384_ID
            + bytes.fromhex("a11a301806092a864886f70d010108") + _SHA384_ID
            + bytes.fromhex("a203020130"))


class TokenError(ValueError):
    """A token, token request or challenge that cannot be read (``reason`` says why)."""

    def __init__(self, message: str, reason: str = "token_malformed") -> None:
        super().__init__(message)
        self.reason = reason


def b64url(data: bytes, *, pad: bool = False) -> str:
    """base64url (RFC 4648 §5), without padding unless asked."""
    s = base64.urlsafe_b64encode(data).decode("ascii")
    return s if pad else s.rstrip("=")


def b64url_decode(text: str | bytes) -> bytes:
    """base64url with or without padding; :class:`TokenError` on anything else."""
    if isinstance(text, bytes):
        try:
            text = text.decode("ascii")
        except UnicodeDecodeError:
            raise TokenError("not base64url") from None
    if not re.fullmatch(r"[A-Za-z0-9_-]*={0,2}", text):
        raise TokenError("not base64url")
    body = text.rstrip("=")
    if len(body) % 4 == 1:
        raise TokenError("not base64url")
    try:
        return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise TokenError("not base64url") from None


# ---- DER of the issuer key ------------------------------------------------------------------
def _der_len(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def _der_int(x: int) -> bytes:
    b = x.to_bytes(x.bit_length() // 8 + 1, "big")  # a leading 0 when the top bit is set
    return b"\x02" + _der_len(len(b)) + b


def _der_read(data: bytes, at: int, tag: int) -> tuple[bytes, int]:
    """The content of the TLV with ``tag`` at ``at`` and the offset after it."""
    if at + 2 > len(data) or data[at] != tag:
        raise TokenError("bad DER", "token_key")
    n = data[at + 1]
    at += 2
    if n & 0x80:
        width = n & 0x7F
        if width == 0 or width > 4 or at + width > len(data):
            raise TokenError("bad DER", "token_key")
        n = int.from_bytes(data[at:at + width], "big")
        at += width
    if at + n > len(data):
        raise TokenError("bad DER", "token_key")
    return data[at:at + n], at + n


def spki_der(pk: rsa.RSAPublicKey) -> bytes:
    """The RSASSA-PSS ``SubjectPublicKeyInfo`` of ``pk`` (RFC 9578 §6.5)."""
    nums = pk.public_numbers()
    rsa_pub = _der_int(nums.n) + _der_int(nums.e)
    rsa_pub = b"\x30" + _der_len(len(rsa_pub)) + rsa_pub
    bits = b"\x00" + rsa_pub
    bit_string = b"\x03" + _der_len(len(bits)) + bits
    body = _PSS_ALG + bit_string
    return b"\x30" + _der_len(len(body)) + body


def public_key_from_spki(der: bytes) -> rsa.RSAPublicKey:
    """The 2048-bit RSA key of an RSASSA-PSS SPKI (the exact algorithm identifier above)."""
    body, end = _der_read(der, 0, 0x30)
    if end != len(der) or not body.startswith(_PSS_ALG):
        raise TokenError("not an RSASSA-PSS (SHA-384, salt 48) public key", "token_key")
    bits, end = _der_read(body, len(_PSS_ALG), 0x03)
    if end != len(body) or not bits or bits[0] != 0:
        raise TokenError("bad public key bit string", "token_key")
    seq, end = _der_read(bits, 1, 0x30)
    n_raw, at = _der_read(seq, 0, 0x02)
    e_raw, at = _der_read(seq, at, 0x02)
    n, e = int.from_bytes(n_raw, "big"), int.from_bytes(e_raw, "big")
    if n.bit_length() != 8 * NK:
        raise TokenError(f"the key must be {8 * NK} bits, got {n.bit_length()}", "token_key")
    try:
        return rsa.RSAPublicNumbers(e, n).public_key()
    except ValueError as exc:
        raise TokenError(f"bad RSA key: {exc}", "token_key") from None


def token_key_id(spki: bytes) -> bytes:
    """``token_key_id = SHA-256(SPKI)``."""
    return hashlib.sha256(spki).digest()


# ---- the structures -------------------------------------------------------------------------
def _opaque16(b: bytes) -> bytes:
    return _U16.pack(len(b)) + b


def _type2(data: bytes, what: str, length: int) -> int:
    """The token type of ``data``, a type 2 ``what`` of ``length`` bytes; TokenError if not."""
    if len(data) < 2:
        raise TokenError(f"truncated {what}")
    (ttype,) = _U16.unpack_from(data, 0)
    if ttype != TOKEN_TYPE:
        raise TokenError(f"token type {ttype:#06x} is not supported (only 0x0002)")
    if len(data) != length:
        raise TokenError(f"a type 2 {what} is {length} bytes, got {len(data)}")
    return int(ttype)


@dataclass(frozen=True)
class TokenChallenge:
    """RFC 9577 §2.1.  ``origin_info`` is kept as bytes (comma-separated names)."""

    issuer_name: bytes
    redemption_context: bytes = b""
    origin_info: bytes = b""
    token_type: int = TOKEN_TYPE

    def __post_init__(self) -> None:
        if not 1 <= len(self.issuer_name) < 1 << 16:
            raise TokenError("issuer_name must be 1..65535 bytes")
        if len(self.redemption_context) not in (0, 32):
            raise TokenError("redemption_context must be 0 or 32 bytes")
        if len(self.origin_info) >= 1 << 16:
            raise TokenError("origin_info too long")

    def encode(self) -> bytes:
        return (_U16.pack(self.token_type) + _opaque16(self.issuer_name)
                + bytes([len(self.redemption_context)]) + self.redemption_context
                + _opaque16(self.origin_info))

    def digest(self) -> bytes:
        return hashlib.sha256(self.encode()).digest()

    @classmethod
    def decode(cls, data: bytes) -> TokenChallenge:
        try:
            (ttype,) = _U16.unpack_from(data, 0)
            (ni,) = _U16.unpack_from(data, 2)
            issuer = data[4:4 + ni]
            at = 4 + ni
            nr = data[at]
            ctx = data[at + 1:at + 1 + nr]
            at += 1 + nr
            (no,) = _U16.unpack_from(data, at)
            origin = data[at + 2:at + 2 + no]
            at += 2 + no
        except (struct.error, IndexError):
            raise TokenError("truncated TokenChallenge") from None
        if at != len(data) or len(issuer) != ni or len(ctx) != nr or len(origin) != no:
            raise TokenError("TokenChallenge length mismatch")
        return cls(issuer, ctx, origin, ttype)


@dataclass(frozen=True)
class Token:
    """RFC 9577 §2.2 with type 2's 256-byte authenticator."""

    nonce: bytes
    challenge_digest: bytes
    token_key_id: bytes
    authenticator: bytes
    token_type: int = TOKEN_TYPE

    @property
    def token_input(self) -> bytes:
        """The signed message: ``token_type ‖ nonce ‖ challenge_digest ‖ token_key_id``."""
        return _U16.pack(self.token_type) + self.nonce + self.challenge_digest + self.token_key_id

    def encode(self) -> bytes:
        return self.token_input + self.authenticator

    @classmethod
    def decode(cls, data: bytes) -> Token:
        ttype = _type2(data, "token", TOKEN_LEN)
        return cls(data[2:34], data[34:66], data[66:98], data[98:], ttype)


@dataclass(frozen=True)
class TokenRequest:
    """RFC 9578 §6.1."""

    truncated_token_key_id: int
    blinded_msg: bytes
    token_type: int = TOKEN_TYPE

    def encode(self) -> bytes:
        return _U16.pack(self.token_type) + bytes([self.truncated_token_key_id]) + self.blinded_msg

    @classmethod
    def decode(cls, data: bytes) -> TokenRequest:
        ttype = _type2(data, "TokenRequest", TOKEN_REQUEST_LEN)
        return cls(data[2], data[3:], ttype)


@dataclass(frozen=True)
class ClientState:
    """What a client keeps between its TokenRequest and the TokenResponse."""

    nonce: bytes
    challenge_digest: bytes
    token_key_id: bytes
    inv: bytes

    @property
    def token_input(self) -> bytes:
        return _U16.pack(TOKEN_TYPE) + self.nonce + self.challenge_digest + self.token_key_id


# ---- the protocol ---------------------------------------------------------------------------
def begin_request(pk: rsa.RSAPublicKey, challenge: bytes, *, spki: bytes | None = None,
                  nonce: bytes | None = None, salt: bytes | None = None,
                  r: int | None = None) -> tuple[bytes, ClientState]:
    """Client: a TokenRequest for ``challenge`` (encoded TokenChallenge) and its state
    (RFC 9578 §6.1).  ``nonce``, ``salt`` and the blind ``r`` come from the OS CSPRNG
    unless given (test vectors)."""
    spki = spki_der(pk) if spki is None else spki
    kid = token_key_id(spki)
    nonce = secrets.token_bytes(32) if nonce is None else nonce
    if len(nonce) != 32:
        raise TokenError("the nonce must be 32 bytes")
    digest = hashlib.sha256(challenge).digest()
    state = ClientState(nonce, digest, kid, b"")
    blinded, inv = blindrsa.blind(pk, state.token_input, VARIANT, salt=salt, r=r)
    return (TokenRequest(kid[-1], blinded).encode(),
            ClientState(nonce, digest, kid, inv))


def finalize_token(pk: rsa.RSAPublicKey, state: ClientState, response: bytes) -> bytes:
    """Client: the Token from the issuer's TokenResponse (RFC 9578 §6.3)."""
    if len(response) != NK:
        raise TokenError(f"a type 2 TokenResponse is {NK} bytes, got {len(response)}")
    sig = blindrsa.finalize(pk, state.token_input, response, state.inv, VARIANT)
    return state.token_input + sig


def issue(sk: rsa.RSAPrivateKey, request: TokenRequest) -> bytes:
    """Issuer: the TokenResponse (``BlindSign``) of a decoded TokenRequest (RFC 9578 §6.2)."""
    return blindrsa.blind_sign(sk, request.blinded_msg)


def verify_token(pk: rsa.RSAPublicKey, token: Token) -> bool:
    """Origin: the authenticator is a valid signature of the token input (RFC 9578 §6.4)."""
    return blindrsa.verify(pk, token.token_input, token.authenticator, VARIANT)


# ---- HTTP (RFC 9577) ------------------------------------------------------------------------
_AUTH = re.compile(r'^\s*PrivateToken\s+token\s*=\s*(?:"([A-Za-z0-9_=-]*)"|([A-Za-z0-9_=-]*))\s*$',
                   re.IGNORECASE)


def parse_private_token_auth(value: str | bytes) -> bytes | None:
    """The token of an ``Authorization: PrivateToken token=…`` header, None if the header
    uses another scheme; :class:`TokenError` if it is PrivateToken but malformed."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if not value.lstrip()[:12].lower() == "privatetoken":
        return None
    m = _AUTH.match(value)
    if m is None:
        raise TokenError("Authorization: PrivateToken needs exactly one token=<base64url>")
    return b64url_decode(m.group(1) if m.group(1) is not None else m.group(2))


def authorization_header(token: bytes) -> str:
    """``PrivateToken token="…"`` for ``token``."""
    return f'PrivateToken token="{b64url(token)}"'


def www_authenticate(challenge: bytes, token_key: bytes, *, max_age: int | None = None) -> str:
    """A ``WWW-Authenticate: PrivateToken challenge=…, token-key=…`` value (RFC 9577 §2.1)."""
    out = f'PrivateToken challenge="{b64url(challenge)}", token-key="{b64url(token_key)}"'
    if max_age is not None:
        out += f', max-age="{max_age}"'
    return out
