"""RSASSA-PSS verification: the gmpy2 backend (GMP powmod + EMSA-PSS-VERIFY written out in
blindrsa) gives the same answer as cryptography/OpenSSL on every input.

Differential tests: the RFC 9474 / RFC 9578 vectors, random valid signatures, signatures
and messages mutated by hypothesis (bit flips, lengths, s = 0, 1, n − 1, n, …), and encoded
messages (EM) mutated field by field (top bits, zero padding, the 0x01 separator, salt,
H, the 0xbc trailer) then signed with the raw private key, so that every check of
EMSA-PSS-VERIFY is reached (a random signature fails at the trailer 255 times in 256).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ldpstream.privacypass import blindrsa
from ldpstream.privacypass.tokens import Token, public_key_from_spki

gmpy2 = pytest.importorskip("gmpy2")  # the pyproject dependency; the fallback is tested below

HERE = Path(__file__).parents[1] / "vectors"
RFC9474 = json.loads((HERE / "rfc9474.json").read_text())
RFC9578 = json.loads((HERE / "rfc9578.json").read_text())
PSS = blindrsa.RSABSSA_SHA384_PSS_DETERMINISTIC
PSSZERO = blindrsa.RSABSSA_SHA384_PSSZERO_DETERMINISTIC
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


class Key:
    """A private key, its public numbers and both verifiers per salt length."""

    def __init__(self, sk: rsa.RSAPrivateKey) -> None:
        self.sk, self.pk = sk, sk.public_key()
        nums = sk.private_numbers()
        self.n, self.e, self.d = nums.public_numbers.n, nums.public_numbers.e, nums.d
        self.k = (self.n.bit_length() + 7) // 8
        self.em_bits = self.n.bit_length() - 1
        self.fast = {v.salt_length: blindrsa.PSSVerifier(self.pk, v, backend="gmpy2")
                     for v in (PSS, PSSZERO)}
        self.ossl = {v.salt_length: blindrsa.PSSVerifier(self.pk, v, backend="openssl")
                     for v in (PSS, PSSZERO)}

    def sign(self, msg: bytes, variant: blindrsa.Variant = PSS) -> bytes:
        return self.sk.sign(msg, variant.pss, hashes.SHA384())

    def raw_sign(self, em: int) -> bytes:
        """``s = em^d mod n``: a signature whose public operation gives back ``em``."""
        assert 0 <= em < self.n
        return int(gmpy2.powmod(em, self.d, self.n)).to_bytes(self.k, "big")

    def reference(self, msg: bytes, sig: bytes, salt_length: int) -> bool:
        """cryptography's own verify (with RFC 8017's length rule, see the test below)."""
        if len(sig) != self.k:
            return False
        v = PSS if salt_length == 48 else PSSZERO
        try:
            self.pk.verify(sig, msg, v.pss, hashes.SHA384())
        except (InvalidSignature, ValueError):
            return False
        return True

    def agree(self, msg: bytes, sig: bytes, salt_length: int = 48) -> bool:
        """The answer of all three (asserting they agree)."""
        ref = self.reference(msg, sig, salt_length)
        assert self.fast[salt_length].verify(msg, sig) is ref, (msg.hex(), sig.hex())
        assert self.ossl[salt_length].verify(msg, sig) is ref
        return ref


@pytest.fixture(scope="module", params=[(2048, 65537), (2049, 3), (2047, 65537)],
                ids=["2048-e65537", "2049-e3", "2047-e65537"])
def key(request: Any) -> Key:
    # 2049 bits: emLen = k − 1 (I2OSP of §8.1.2 can fail); 2047: two top bits must be zero
    bits, e = request.param
    return Key(rsa.generate_private_key(public_exponent=e, key_size=bits))


def _vector_key(v: dict[str, str]) -> rsa.RSAPrivateKey:
    p, q, d, e, n = (int(v[x], 16) for x in ("p", "q", "d", "e", "n"))
    return rsa.RSAPrivateNumbers(p, q, d, rsa.rsa_crt_dmp1(d, p), rsa.rsa_crt_dmq1(d, q),
                                 rsa.rsa_crt_iqmp(p, q),
                                 rsa.RSAPublicNumbers(e, n)).private_key()


# ---- the published vectors -----------------------------------------------------------------
@pytest.mark.parametrize("vec", RFC9474, ids=[v["name"] for v in RFC9474])
def test_rfc9474_signatures_verify_with_both_backends(vec: dict[str, str]) -> None:
    variant = blindrsa.VARIANTS[vec["name"]]
    k = Key(_vector_key(vec))
    prepared, sig = bytes.fromhex(vec["prepared_msg"]), bytes.fromhex(vec["sig"])
    assert k.agree(prepared, sig, variant.salt_length)
    assert blindrsa.emsa_pss_verify(prepared, int(vec["encoded_msg"], 16), k.em_bits,
                                    variant.salt_length)
    for bad_msg in (prepared + b"\0", prepared[:-1], b""):
        assert not k.agree(bad_msg, sig, variant.salt_length)
    other = 0 if variant.salt_length else 48  # the other salt length never verifies
    assert not k.agree(prepared, sig, other)
    for backend in blindrsa.BACKENDS:
        assert blindrsa.verify(k.pk, prepared, sig, variant, backend=backend)


@pytest.mark.parametrize("i", range(len(RFC9578)))
def test_rfc9578_tokens_verify_with_both_backends(i: int) -> None:
    vec = RFC9578[i]
    pk = public_key_from_spki(bytes.fromhex(vec["pkS"]))
    tok = Token.decode(bytes.fromhex(vec["token"]))
    for backend in ("gmpy2", "openssl"):
        v = blindrsa.PSSVerifier(pk, PSS, backend=backend)
        assert v.verify(tok.token_input, tok.authenticator)
        assert not v.verify(tok.token_input[:-1] + b"\0", tok.authenticator)


# ---- random and mutated signatures ---------------------------------------------------------
def test_random_valid_signatures_agree(key: Key) -> None:
    for _ in range(40):
        msg = os.urandom(int.from_bytes(os.urandom(1), "big"))
        for variant in (PSS, PSSZERO):
            assert key.agree(msg, key.sign(msg, variant), variant.salt_length)


_SIG_MUTATIONS = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(0, 7)),
    st.tuples(st.just("cut"), st.integers(0, 10_000), st.just(0)),
    st.tuples(st.just("extend"), st.integers(1, 3), st.integers(0, 255)),
    st.tuples(st.just("value"), st.sampled_from(["0", "1", "n-1", "n", "n+1", "max",
                                                 "random", "cut-leading", "plus-n"]),
              st.just(0)),
)


def _mutate_sig(key: Key, sig: bytes, mutation: tuple[str, Any, int], rnd: bytes) -> bytes:
    kind, a, b = mutation
    if kind == "flip":
        out = bytearray(sig)
        out[a % len(out)] ^= 1 << b
        return bytes(out)
    if kind == "cut":
        return sig[:a % len(sig)]
    if kind == "extend":
        return bytes([b]) * int(a) + sig
    n, k = key.n, key.k
    values = {"0": 0, "1": 1, "n-1": n - 1, "n": n, "n+1": n + 1, "max": (1 << 8 * k) - 1,
              "random": int.from_bytes(rnd, "big") % (1 << 8 * k)}
    if a == "plus-n":  # s + n: the same value mod n, out of range (k + 1 octets if need be)
        v = int.from_bytes(sig, "big") + n
        return v.to_bytes(k if v < 1 << 8 * k else k + 1, "big")
    if a == "cut-leading":  # a signature < 256^(k-1) written in k − 1 octets
        return (int.from_bytes(sig, "big") % (1 << 8 * (k - 1))).to_bytes(k - 1, "big")
    return values[a].to_bytes(k, "big")


@SETTINGS
@given(msg=st.binary(max_size=300), mutation=_SIG_MUTATIONS, rnd=st.binary(min_size=300,
                                                                           max_size=300))
def test_mutated_signatures_agree(key: Key, msg: bytes, mutation: tuple[str, Any, int],
                                  rnd: bytes) -> None:
    sig = key.sign(msg)
    assert key.agree(msg, sig)
    bad = _mutate_sig(key, sig, mutation, rnd)
    assert key.agree(msg, bad) is (bad == sig)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(mutations=st.lists(st.one_of(st.none(), _SIG_MUTATIONS), max_size=12),
       rnd=st.binary(min_size=300, max_size=300))
def test_verify_many_answers_as_verify_one_by_one(key: Key, mutations: list[Any],
                                                  rnd: bytes) -> None:
    msgs = [rnd[:i + 1] for i in range(len(mutations))]
    sigs = [key.sign(m) for m in msgs]
    sigs = [s if mu is None else _mutate_sig(key, s, mu, rnd) for s, mu in zip(sigs, mutations)]
    expected = [key.agree(m, s) for m, s in zip(msgs, sigs)]
    assert key.fast[48].verify_many(msgs, sigs) == expected
    assert key.ossl[48].verify_many(msgs, sigs) == expected
    with pytest.raises(ValueError, match="signatures"):
        key.fast[48].verify_many(msgs + [b"x"], sigs)


@SETTINGS
@given(msg=st.binary(max_size=300), at=st.integers(0, 10_000), bit=st.integers(0, 7),
       extra=st.binary(min_size=1, max_size=4))
def test_mutated_messages_agree(key: Key, msg: bytes, at: int, bit: int, extra: bytes) -> None:
    sig = key.sign(msg)
    if msg:
        flipped = bytearray(msg)
        flipped[at % len(msg)] ^= 1 << bit
        assert not key.agree(bytes(flipped), sig)
        assert not key.agree(msg[:-1], sig)
    assert not key.agree(msg + extra, sig)
    assert not key.agree(extra + msg, sig)


# ---- mutated encoded messages, signed with the raw private key -----------------------------
_FIELDS = ["none", "top", "above", "ps", "separator", "salt", "h", "trailer", "salt-length"]


@SETTINGS
@given(msg=st.binary(max_size=200), salt48=st.booleans(), field=st.sampled_from(_FIELDS),
       at=st.integers(0, 10_000), delta=st.integers(1, 255), rnd=st.binary(min_size=48,
                                                                           max_size=48))
def test_mutated_encoded_messages_agree(key: Key, msg: bytes, salt48: bool, field: str,
                                        at: int, delta: int, rnd: bytes) -> None:
    s_len = 48 if salt48 else 0
    em_len = (key.em_bits + 7) // 8
    salt = rnd[:s_len]
    em = blindrsa.os2ip(blindrsa.emsa_pss_encode(msg, key.em_bits, salt))
    top = 8 * em_len - key.em_bits  # bits of EM that must be zero
    db_len = em_len - 49
    ps_len = db_len - s_len - 1

    def xor_octet(index: int) -> int:  # octet `index` of EM (0 = leftmost), XOR delta
        return em ^ (delta << 8 * (em_len - 1 - index))

    if field == "top":
        assume(top > 0)
        em |= 1 << (key.em_bits + at % top)
    elif field == "above":  # EM ≥ 256^emLen: I2OSP(m, emLen) fails (only if emLen < k)
        em += 1 << 8 * em_len
    elif field == "ps":
        em = xor_octet(at % ps_len) & ((1 << key.em_bits) - 1)
        # the first octet's top bits stay zero: only a change below them counts
        assume(em != blindrsa.os2ip(blindrsa.emsa_pss_encode(msg, key.em_bits, salt)))
    elif field == "separator":
        em = xor_octet(ps_len)
    elif field == "salt":
        assume(s_len > 0)
        em = xor_octet(ps_len + 1 + at % s_len)
    elif field == "h":
        em = xor_octet(db_len + at % 48)
    elif field == "trailer":
        em = xor_octet(em_len - 1)
    elif field == "salt-length":  # a valid encoding with another salt length
        other = (rnd + rnd)[:(at % 90) + 1]
        assume(len(other) != s_len)
        em = blindrsa.os2ip(blindrsa.emsa_pss_encode(msg, key.em_bits, other))
    assume(em < key.n)
    sig = key.raw_sign(em)
    assert key.agree(msg, sig, s_len) is (field == "none")
    assert blindrsa.emsa_pss_verify(msg, em, key.em_bits, s_len) is (field == "none")


def test_openssl_alone_takes_a_signature_cut_of_its_leading_zero(key: Key) -> None:
    # RFC 8017 §8.1.2 step 1 refuses a signature of another length than k; OpenSSL reads
    # the integer whatever its length.  Both backends follow the RFC.
    for _ in range(20_000):
        msg = os.urandom(16)
        sig = key.sign(msg)
        if sig[0] == 0:
            break
    else:  # pragma: no cover - (255/256)^20000
        pytest.fail("no signature with a leading zero octet")
    key.pk.verify(sig[1:], msg, PSS.pss, hashes.SHA384())  # OpenSSL: valid
    assert not key.fast[48].verify(msg, sig[1:])
    assert not key.ossl[48].verify(msg, sig[1:])
    assert key.agree(msg, sig)


# ---- backends ------------------------------------------------------------------------------
def test_auto_is_gmpy2_when_installed_and_openssl_without_it(monkeypatch: Any) -> None:
    vec = RFC9578[0]
    pk = public_key_from_spki(bytes.fromhex(vec["pkS"]))
    tok = Token.decode(bytes.fromhex(vec["token"]))
    assert blindrsa.default_backend() == "gmpy2"
    assert blindrsa.PSSVerifier(pk, PSS).backend == "gmpy2"
    monkeypatch.setattr(blindrsa, "_gmpy2", None)
    assert blindrsa.default_backend() == "openssl"
    v = blindrsa.PSSVerifier(pk, PSS)
    assert v.backend == "openssl" and v.verify(tok.token_input, tok.authenticator)
    assert blindrsa.verify(pk, tok.token_input, tok.authenticator, PSS)
    with pytest.raises(ImportError, match="gmpy2"):
        blindrsa.PSSVerifier(pk, PSS, backend="gmpy2")
    with pytest.raises(ValueError, match="backend must be one of"):
        blindrsa.PSSVerifier(pk, PSS, backend="fast")


@given(data=st.binary(max_size=600))
def test_the_builtin_sha384_is_sha384(data: bytes) -> None:
    assert blindrsa._SHA384(data).digest() == hashlib.sha384(data).digest()


def test_vector_keys_load_as_pem() -> None:
    # the RFC 9578 private keys are PEM: the same key through both paths
    sk = serialization.load_pem_private_key(bytes.fromhex(RFC9578[0]["skS"]), password=None)
    assert isinstance(sk, rsa.RSAPrivateKey)
    k = Key(sk)
    msg = b"ldpstream"
    assert k.agree(msg, k.sign(msg))
