"""Stand-ins for the gateway and the issuer in the device SDK's tests: a scripted gateway
and an issuer blind-signing with the shared vectors' key (the real services:
tests/sdks/test_sdk_e2e.py, tests/sdks/test_sdk_tokens.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography.hazmat.primitives import serialization

from ldpstream.privacypass.tokens import NK

__all__ = ["Gateway", "Issuer", "T0", "V", "WS"]

ROOT = Path(__file__).resolve().parents[2]
V = json.loads((ROOT / "sdks/vectors/privacypass/tokens.json").read_text())["cases"][0]
WS, T0 = 600, 1_800_000_000  # T0: a window start


class Gateway:
    """A scripted stand-in for the gateway: answers from ``script`` (status, headers) in
    turn (then 202), recording every request's headers and body."""

    def __init__(self) -> None:
        self.script: list[tuple[int, dict[str, str]]] = []
        self.seen: list[tuple[dict[str, str], bytes]] = []
        self.reason: Callable[[], str] = lambda: "r"  # of a refusal
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.seen.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status, headers = outer.script.pop(0) if outer.script else (202, {})
                answer = (json.dumps({"accepted_messages": 1, "accepted_reports": 1})
                          if status == 202
                          else json.dumps({"reason": outer.reason(), "detail": "d"}))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def keys(self) -> list[str]:
        return [h["idempotency-key"] for h, _ in self.seen]


class Issuer:
    """Lists the vectors' key for ``windows`` and blind-signs every token request."""

    def __init__(self, windows: list[int]) -> None:
        sk: Any = serialization.load_pem_private_key(V["sk_pem"].encode(), None)
        d, n = sk.private_numbers().d, sk.public_key().public_numbers().n
        self.asked: list[int] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                cid = parse_qs(urlsplit(self.path).query)["collection"][0]
                self._send(json.dumps({"ldp-issuer-name": "ldpstream", "token-keys": [
                    {"token-type": 2, "token-key": V["token_key"], "ldp-collection": cid,
                     "ldp-window": w, "ldp-window-seconds": WS} for w in windows]}).encode())

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.asked.append(int(parse_qs(urlsplit(self.path).query)["window"][0]))
                self._send(b"".join(pow(int.from_bytes(body[i + 3:i + 259], "big"), d, n)
                                    .to_bytes(NK, "big") for i in range(0, len(body), 259)))

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
