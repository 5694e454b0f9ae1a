"""Each SDK's own test suite (shared vectors, permanent answers, device and store under
concurrency, gateway client) passes through the standard commands a developer runs:
``npm test`` in sdks/js and ``mvn test`` in sdks/java (offline: scripts/sdks.sh fetched
everything at bootstrap).
"""

from __future__ import annotations

import shutil
import subprocess

from .conftest import JAVA, JS, _need


def test_typescript_sdk_suite_passes_through_npm_test() -> None:
    _need(JS / "node_modules" / ".bin" / "tsc", "the TypeScript SDK")
    proc = subprocess.run([shutil.which("npm") or "npm", "test", "--silent"], cwd=JS,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "# fail 0" in proc.stdout and "vector pem-32" in proc.stdout
    assert "permanent multi-all" in proc.stdout and "two processes on one store" in proc.stdout


def test_java_sdk_suite_passes_through_mvn_test() -> None:
    _need(JAVA / "target" / "test-classes", "the Java SDK (scripts/sdks.sh)")
    # offline: scripts/sdks.sh fetched every plugin (surefire's JUnit 5 provider too)
    proc = subprocess.run([shutil.which("mvn") or "mvn", "-o", "-B", "test"], cwd=JAVA,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    runs = [line for line in proc.stdout.splitlines() if line.startswith("[INFO] Tests run:")
            and " -- in " not in line]
    assert runs, proc.stdout[-3000:]
    total = int(runs[-1].split("Tests run: ")[1].split(",")[0])
    assert total >= 100 and ", Failures: 0, Errors: 0, Skipped: 0" in runs[-1], runs[-1]
