"""The TypeScript SDK runs in a browser: headless Chromium loads the built ES modules, passes
every shared vector (and every permanent-answer vector), and Devices there
(crypto.getRandomValues, the default IndexedDB store) build messages that ldpcore decodes,
sharing one cadence, and derive the same permanent answer after a page reload."""

from __future__ import annotations

import json
import shutil
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec, decode_message

from .conftest import JS, ROOT, _need

pytestmark = pytest.mark.browser

PAGE = """<!doctype html><meta charset="utf-8"><title>sdk</title>
<script type="module">
import { CollectionSpec, Device, MemoryStore } from "/js/dist/src/index.js";
import { encodeBinary, encodeJson } from "/js/dist/src/encode.js";
import { makeRerandomizer } from "/js/dist/src/mechanisms.js";
import { WordStream } from "/js/dist/src/random.js";
const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const failures = [];
let checked = 0;
try {
  for (const f of FILES) {
    const doc = await (await fetch("/vectors/" + f)).json();
    for (const c of doc.cases) {
      const spec = CollectionSpec.fromJson(c.collection);
      const oracle = spec.oracle();
      const src = new WordStream(c.words);
      let reps = c.values.map((v) => oracle.perturb(v, src));
      if (c.permanent) {
        const inst = makeRerandomizer(oracle, spec.epsilon1);
        reps = reps.map((r) => inst.rerandomize(r, src));
      }
      if (spec.fingerprint !== c.fingerprint
          || hex(encodeBinary(spec, oracle.columns, reps)) !== c.message_binary
          || encodeJson(spec, oracle.columns, reps) !== c.message_json) failures.push(c.name);
      checked++;
    }
  }
  const prr = await (await fetch("/vectors/permanent/permanent.json")).json();
  for (const c of prr.cases) {
    const spec = CollectionSpec.fromJson(c.collection);
    const secret = new Uint8Array(c.secret.match(/../g).map((h) => parseInt(h, 16)));
    const dev = new Device(spec, { store: new MemoryStore(), secret });
    const reps = [];
    for (const x of c.inputs) reps.push(await dev.permanent(x));
    if (hex(encodeBinary(spec, spec.oracle().columns, reps)) !== c.message_binary) {
      failures.push("permanent " + c.name);
    }
    checked++;
  }
  const spec = CollectionSpec.fromJson(SPEC);
  // two Devices on the default store (IndexedDB) race for the window's one report
  const clock = () => 7200.5;  // one window for both page loads
  const made = await Promise.all([new Device(spec, { clock }).message("b"),
                                  new Device(spec, { clock }).message("b")]);
  const first = made.find((m) => m !== null);
  const msg = first ? hex(first) : null;
  const permanent = JSON.stringify(await new Device(spec).permanent("b"));
  window.__result = { failures, checked, msg, nulls: made.filter((m) => m === null).length,
                      permanent };
} catch (e) {
  window.__result = { error: String(e && e.stack || e) };
}
</script>"""

SPEC = CollectionSpec.from_dict({"id": "browser", "oracle": {"mechanism": "olh", "epsilon": 2.0},
                                 "domain": {"kind": "categories", "labels": ["a", "b", "c"]}})


class _Handler(SimpleHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/":
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(self.page)))
            self.end_headers()
            self.wfile.write(self.page)
            return
        super().do_GET()

    def guess_type(self, path: Any) -> str:
        return "text/javascript" if str(path).endswith(".js") else super().guess_type(path)

    def log_message(self, *args: Any) -> None:
        pass


def test_typescript_sdk_passes_the_vectors_in_headless_chromium() -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    _need(JS / "dist" / "src" / "index.js", "the TypeScript SDK")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_bin = shutil.which("chromedriver")
    if not browser or not driver_bin:
        pytest.fail("chromium and chromium-driver are missing: scripts/system-deps.sh "
                    "installs them")
    files = sorted(p.name for p in (ROOT / "sdks" / "vectors").glob("*.json"))
    _Handler.page = (PAGE.replace("FILES", json.dumps(files))
                     .replace("SPEC", SPEC.to_json()).encode())
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 partial(_Handler, directory=str(Path(ROOT / "sdks"))))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_bin), options=opts)
    try:
        results = []
        for _ in range(2):  # the page, then the page reloaded: the same device
            driver.get(f"http://127.0.0.1:{server.server_address[1]}/")
            results.append(WebDriverWait(driver, 60).until(
                lambda d: d.execute_script("return window.__result || null")))
        result = results[0]
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
    assert "error" not in result, result.get("error")
    vectors = ROOT / "sdks" / "vectors"
    n_cases = sum(len(json.loads((vectors / f).read_text())["cases"]) for f in files)
    n_cases += len(json.loads((vectors / "permanent" / "permanent.json").read_text())["cases"])
    assert result["checked"] == n_cases and result["failures"] == []
    cid, reports = decode_message(SPEC, SPEC.oracle(), bytes.fromhex(result["msg"]))
    assert cid == "browser" and len(reports) == 1
    assert result["nulls"] == 1  # one report per window, whichever Device made it
    reloaded = results[1]
    assert "error" not in reloaded, reloaded.get("error")
    assert reloaded["nulls"] == 2  # the window's report was made before the reload
    assert reloaded["permanent"] == result["permanent"]  # the secret survived in IndexedDB
