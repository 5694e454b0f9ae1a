"""The shared Privacy Pass vectors are what the Python side computes, their tokens verify,
and the gateway reads each carriage (header, token frames, JSON) as that token."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.parse import FRAMES, JSON, OCTETS, TOKEN_FRAMES, Catalogue, parse_body
from ldpcore.collection import CollectionSpec
from ldpstream.privacypass.tokens import Token, b64url_decode, public_key_from_spki, verify_token

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "sdks" / "vectors" / "privacypass"


def test_vectors_are_up_to_date() -> None:
    proc = subprocess.run([sys.executable, str(VECTORS / "generate.py"), "--check"],
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_each_case_verifies_and_every_carriage_parses_to_its_token() -> None:
    cases = json.loads((VECTORS / "tokens.json").read_text())["cases"]
    assert len(cases) >= 2 and FRAMES
    for c in cases:
        pk = public_key_from_spki(b64url_decode(c["token_key"]))
        assert pk.public_numbers() == rsa.RSAPublicNumbers(c["e"], int(c["n"], 16))
        token = bytes.fromhex(c["token"])
        assert verify_token(pk, Token.decode(token))
        cat = Catalogue([CollectionSpec.from_dict(c["collection_spec"])])
        msg = bytes.fromhex(c["message"])
        (m,) = parse_body(OCTETS, msg, cat, c["authorization"].encode())
        assert m.tokens == [token]
        (m,) = parse_body(TOKEN_FRAMES, bytes.fromhex(c["token_frames"]), cat)
        assert m.tokens == [token]
        (m,) = parse_body(JSON, c["json_message"].encode(), cat)
        assert m.tokens == [token]
