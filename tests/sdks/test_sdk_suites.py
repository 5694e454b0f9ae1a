"""Each SDK's own test suite (shared vectors, device, gateway client) passes.

The TypeScript suite runs with node's built-in test runner, the Java suite with the JUnit
console launcher; both were built by scripts/sdks.sh (bootstrap), so nothing here needs
the network.
"""

from __future__ import annotations

import shutil
import subprocess

from .conftest import JAVA, JS, JUNIT, _need


def test_typescript_sdk_suite_passes_through_npm_test() -> None:
    _need(JS / "node_modules" / ".bin" / "tsc", "the TypeScript SDK")
    proc = subprocess.run([shutil.which("npm") or "npm", "test", "--silent"], cwd=JS,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "# fail 0" in proc.stdout and "vector pem-32" in proc.stdout
    assert "permanent multi-all" in proc.stdout and "two processes on one store" in proc.stdout


def test_java_sdk_suite_passes() -> None:
    _need(JUNIT, "the JUnit console launcher")
    _need(JAVA / "target" / "test-classes", "the Java SDK tests")
    cp = f"{JAVA / 'target' / 'classes'}:{JAVA / 'target' / 'test-classes'}"
    proc = subprocess.run([shutil.which("java") or "java", "-jar", str(JUNIT), "execute",
                           "-cp", cp, "--scan-classpath", "--disable-banner",
                           "--details=tree"], cwd=JAVA,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "vector pem-32" in proc.stdout and " 0 tests failed" in proc.stdout
