"""The SDKs as a developer gets them: ``npm pack`` and ``mvn package`` give packages with only
the runtime files, their metadata and a narrow public surface; the example apps (a Node
script, a browser page, a plain Java app) build against those packages — installed, not
linked — and report through a real gateway, worker and query API, the page from another
origin (CORS on the query API and the gateway)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.storage import CollectionCatalogue, load_state

from ..gateway.conftest import GatewayProcess, gateway_env
from ..integration.helpers import ROOT, WorkerProcess, wait_for, worker_env
from .conftest import JAVA, JS, _need

PUBLIC_JS = {"Device", "GatewayClient", "GatewayError", "SpecError", "StoreError",
             "IssuanceError", "CollectionSpec", "fetchSpec", "MemoryStore", "IndexedDbStore",
             "KeyValueStore", "defaultStore"}
PUBLIC_JAVA = {"CollectionSpec", "Device", "Device$Builder", "Device$Clock", "DeviceStore",
               "DeviceStore$Update", "FileStore", "MemoryStore", "GatewayClient",
               "GatewayClient$Accepted", "GatewayClient$QueueResult", "GatewayClient$Sleeper",
               "GatewayException", "SpecException", "StoreException",
               # Privacy Pass (docs/privacy-pass.md): the token protocol and its error
               "PrivacyPass", "PrivacyPass$IssuanceException", "PrivacyPass$RsaKey",
               "PrivacyPass$State", "PrivacyPass$Request", "PrivacyPass$Wallet"}


def _npm_pack(dest: Path) -> Path:
    _need(JS / "node_modules" / ".bin" / "tsc", "the TypeScript SDK")
    proc = subprocess.run([shutil.which("npm") or "npm", "pack", "--json",
                           "--pack-destination", str(dest)], cwd=JS, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout[proc.stdout.index("["):])[0]
    return dest / info["filename"]


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tarball ``npm pack`` makes (once per module: it runs the ``prepare`` build)."""
    return _npm_pack(tmp_path_factory.mktemp("npm-pack"))


def test_npm_pack_holds_the_runtime_files_and_a_narrow_surface(packed: Path,
                                                               tmp_path: Path) -> None:
    tgz = packed
    with tarfile.open(tgz) as tar:
        names = sorted(tar.getnames())
        meta = json.load(tar.extractfile("package/package.json"))  # type: ignore[arg-type]
        index_d = tar.extractfile("package/dist/src/index.d.ts").read().decode()  # type: ignore[union-attr]
    assert tgz.name == f"ldpstream-sdk-{meta['version']}.tgz"
    assert meta["name"] == "@ldpstream/sdk" and meta["license"] == "Apache-2.0"
    assert meta["scripts"]["prepare"] and meta["types"] and meta["exports"]["."]
    assert meta.get("dependencies", {}) == {}  # no runtime dependencies
    assert meta["browser"] == {"./dist/src/file-store.js": False}
    assert {"package/README.md", "package/LICENSE", "package/package.json",
            "package/dist/src/index.js", "package/dist/src/file-store.js"} <= set(names)
    others = [n for n in names if not n.startswith("package/dist/src/")
              and n not in ("package/README.md", "package/LICENSE", "package/package.json")]
    assert others == []  # no tests, tools, benchmarks, examples or TypeScript sources
    assert all(n.endswith((".js", ".d.ts")) for n in names if n.startswith("package/dist/"))
    # what the package exports at run time: the Device, the client, the spec, stores, errors
    modules = tmp_path / "app" / "node_modules" / "@ldpstream"
    modules.mkdir(parents=True)
    with tarfile.open(tgz) as tar:
        tar.extractall(modules, filter="data")
    (modules / "package").rename(modules / "sdk")
    proc = subprocess.run([shutil.which("node") or "node", "--input-type=module", "-e",
                           "import * as m from '@ldpstream/sdk'; import * as n from "
                           "'@ldpstream/sdk/node'; console.log(JSON.stringify("
                           "[Object.keys(m), Object.keys(n)]))"],
                          cwd=tmp_path / "app", capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    values, node_only = json.loads(proc.stdout)
    assert set(values) == PUBLIC_JS, sorted(values)
    assert set(node_only) == {"FileStore", "defaultStorePath"}
    for internal in ("WordStream", "makeOracle", "CryptoSource", "encodeBinary", "DrawSource",
                     "devicePhase", "PermanentWords"):
        assert internal not in index_d
    assert tgz.stat().st_size < 80_000


def test_the_jar_holds_the_sdk_only_at_java_8_bytecode(tmp_path: Path) -> None:
    jar = JAVA / "target" / "ldpstream-sdk-0.2.0.jar"
    _need(jar, "the Java SDK (mvn package)")
    with zipfile.ZipFile(jar) as z:
        names = z.namelist()
        manifest = z.read("META-INF/MANIFEST.MF").decode()
        majors = {z.read(n)[6:8] for n in names if n.endswith(".class")}
    classes = [n for n in names if n.endswith(".class")]
    assert all(n.startswith("org/ldpstream/sdk/") and n.count("/") == 3 for n in classes)
    assert not any("Tool" in n or "Test" in n or "Racer" in n for n in classes)
    assert "META-INF/LICENSE" in names
    assert "Automatic-Module-Name: org.ldpstream.sdk" in manifest
    assert majors == {b"\x00\x34"}  # class file 52: Java 8
    # the public surface: what javap sees as public among the SDK's classes
    javap = shutil.which("javap") or "javap"
    out = subprocess.run([javap, "-cp", str(jar), *(n[:-6].replace("/", ".") for n in classes)],
                         capture_output=True, text=True, timeout=120).stdout
    public = {line.split()[line.split().index("class") + 1 if "class" in line.split()
                            else line.split().index("interface") + 1]
              .split("<")[0].removeprefix("org.ldpstream.sdk.")
              for line in out.splitlines() if line.startswith("public ")
              and (" class " in line or " interface " in line)}
    assert public == PUBLIC_JAVA, sorted(public)
    assert sum(1 for n in classes if "$" not in n) >= 35  # the mechanisms, one class each
    lines = {n: len((JAVA / "src/main/java" / n.replace(".class", ".java")).read_text()
                    .splitlines()) for n in classes if "$" not in n}
    assert lines["org/ldpstream/sdk/Mechanisms.class"] < 400  # was 1,192 lines
    mechanisms = ("Grr", "Unary", "LocalHashing", "Hr", "Hrr", "Ss", "Sketch", "Hh", "Haar",
                  "Sw", "Pm", "Duchi", "Pem", "Padded", "SetSize", "Multi")
    assert max(lines[f"org/ldpstream/sdk/{m}.class"] for m in mechanisms) < 150


# ---- the example apps, end to end -----------------------------------------------------------
class _Static(SimpleHTTPRequestHandler):
    def guess_type(self, path: Any) -> str:
        return "text/javascript" if str(path).endswith(".js") else super().guess_type(path)

    def log_message(self, *args: Any) -> None:
        pass


def _serve_dir(directory: Path) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Static, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _install_example(name: str, tgz: Path, tmp: Path) -> Path:
    """Copy an example app, install the packed SDK into it as npm would, build it."""
    app = tmp / name
    shutil.copytree(JS / "examples" / name, app)
    proc = subprocess.run([shutil.which("npm") or "npm", "install", "--offline", "--no-audit",
                           "--no-fund", str(tgz)], cwd=app, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tsc = JS / "node_modules" / ".bin" / "tsc"
    proc = subprocess.run([str(tsc), "-p", str(app)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return app


def _api(redis_server: Any, names: dict[str, str], origins: str, tmp: Path) -> Any:
    import os
    import sys

    from ldpstream.dev.servers import _die_with_parent, free_port, wait_port

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.update({"LDP_REDIS_URL": redis_server.url, "LDP_REDIS_PREFIX": names["prefix"],
                "LDP_API_PORT": str(port), "LDP_CORS_ORIGINS": origins,
                "PYTHONPATH": str(ROOT)})
    log = open(tmp / "api.log", "ab")  # noqa: SIM115 - closed by the caller
    proc = subprocess.Popen([sys.executable, "-m", "ldpstream", "serve"], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    wait_port(port, 60, proc)
    return proc, log, f"http://127.0.0.1:{port}"


@pytest.mark.integration
@pytest.mark.any_broker  # the apps and CORS, not the broker
@pytest.mark.browser
def test_example_apps_report_and_a_page_reads_spec_and_answer_from_other_origins(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        packed: Path, tmp_path: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    spec = CollectionSpec.from_dict({"id": "app-version", "min_reports": 1,
                                     "oracle": {"mechanism": "grr", "epsilon": 2.0},
                                     "domain": {"kind": "categories",
                                                "labels": ["3.1.0", "3.2.0", "3.2.1"]}})
    CollectionCatalogue(redis_client, ldp_names["prefix"]).register(spec)
    tgz = packed
    node_app = _install_example("node", tgz, tmp_path)
    page_app = _install_example("browser", tgz, tmp_path)
    jar = JAVA / "target" / "ldpstream-sdk-0.2.0.jar"
    classes = tmp_path / "java-app"
    subprocess.run(["javac", "--release", "8", "-Xlint:-options", "-cp", str(jar), "-d",
                    str(classes), str(JAVA / "examples" / "ReportApp.java")], check=True,
                   timeout=300)
    page = _serve_dir(page_app)
    origin = f"http://127.0.0.1:{page.server_address[1]}"
    gw = GatewayProcess(gateway_env(kafka, redis_server, ldp_names), tmp_path / "gw.log").start()
    worker = WorkerProcess(worker_env(kafka, redis_server, ldp_names, LDP_ENGINE="aiokafka"),
                           tmp_path / "worker.log").start()
    api, api_log, api_url = _api(redis_server, ldp_names, origin, tmp_path)
    driver = None
    try:
        # the Node app, twice: one report per window, the second run sends nothing new
        for want in (True, False):
            out = subprocess.run(["node", str(node_app / "dist" / "report.js"), api_url,
                                  gw.url(), "app-version", "3.2.1"], capture_output=True,
                                 text=True, timeout=120)
            assert out.returncode == 0, out.stderr
            assert json.loads(out.stdout) == {"queued": want, "sent": int(want), "refused": 0,
                                              "pending": 0, "dropped": 0, "notBefore": None}
        out = subprocess.run(["java", "-cp", f"{jar}:{classes}", "ReportApp", api_url,
                              gw.url(), "app-version", "3.2.0", str(tmp_path / "android-files")],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == {"queued": True, "sent": 1, "pending": 0,
                                          "refused": 0, "dropped": 0}
        # the page, on a third origin: spec and answer from the API, the report to the gateway
        browser = shutil.which("chromium") or shutil.which("chromium-browser")
        driver_bin = shutil.which("chromedriver")
        if not browser or not driver_bin:
            pytest.fail("chromium and chromium-driver are missing: scripts/system-deps.sh")
        opts = webdriver.ChromeOptions()
        opts.binary_location = browser
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                    "--disable-gpu"):
            opts.add_argument(arg)
        driver = webdriver.Chrome(service=Service(driver_bin), options=opts)
        driver.get(f"{origin}/index.html?api={api_url}&gateway={gw.url()}"
                   "&collection=app-version&value=3.1.0")
        result = WebDriverWait(driver, 90).until(
            lambda d: d.execute_script("return window.__result || null"))
        assert "error" not in result, result["error"]
        assert result["fingerprint"] == spec.fingerprint and result["queued"] is True
        assert result["sent"]["sent"] == 1
        assert result["answer"]["collection"] == "app-version" and result["stateVersion"]
        wait_for(lambda: load_state(redis_client, spec, prefix=ldp_names["prefix"]).n >= 3,
                 60, "the three apps' reports counted")
        assert load_state(redis_client, spec, prefix=ldp_names["prefix"]).n == 3
        # from an origin not listed, the browser cannot read the spec
        other = origin.replace("127.0.0.1", "localhost")
        driver.get(f"{other}/index.html?api={api_url}&gateway={gw.url()}"
                   "&collection=app-version&value=3.1.0")
        blocked = WebDriverWait(driver, 60).until(
            lambda d: d.execute_script("return window.__result || null"))
        assert "Failed to fetch" in blocked.get("error", ""), blocked
    finally:
        if driver is not None:
            driver.quit()
        page.shutdown()
        page.server_close()
        api.terminate()
        api.wait(10)
        api_log.close()
        assert gw.stop() == 0, gw.output()
        assert worker.stop() == 0, worker.output()
