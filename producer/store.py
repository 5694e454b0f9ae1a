"""A device's private store: its secret, the reporting cadence and the outbox of reports.

One JSON document (docs/wire-format.md §6, "device store") shared by every
:class:`~producer.sdk.Device` of an app and by the TypeScript and Java SDKs::

    {"format": "ldpstream-device-store", "version": 1,
     "secret": "<64 hex digits>",
     "collections": {<collection fingerprint>: {"collection": id, "window": start | null,
                                                "sent": count}},
     "outbox": [{"key", "collection", "fingerprint", "type", "body", "made"}, ...],
     "dropped": count, "refused": count, "not_before": epoch s | null}

It never holds a true value or an answer: permanent answers are derived from the secret
(:class:`ldpcore.reference.PermanentWords`).  Keys it does not know are kept as they
are, so a newer SDK (or another part of the app) may add its own.

* :class:`FileStore` (the default, at :func:`default_store_path`: the user data
  directory of ``platformdirs``) changes the file under an exclusive lock — a POSIX
  record lock on ``<file>.lock`` (the same lock the Java SDK takes) and a lock per
  path inside the process — so threads and processes never lose an update; the file is
  replaced atomically (mode 0600, directory 0700).
* :class:`MemoryStore`: nothing persists (an app that opts out of storage; tests).

>>> store = MemoryStore()
>>> store.secret() == store.secret() and len(store.secret()) == 32
True
"""

from __future__ import annotations

import copy
import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["DeviceStore", "FileStore", "MemoryStore", "default_store_path", "STORE_FORMAT",
           "STORE_VERSION", "QUEUE_LIMIT", "StoreError"]

STORE_FORMAT = "ldpstream-device-store"
STORE_VERSION = 1
QUEUE_LIMIT = 1000
"""Default bound of the outbox: beyond it the oldest report is dropped (and counted)."""
SECRET_BYTES = 32

T = TypeVar("T")


class StoreError(ValueError):
    """The store file is not a device store (or is damaged): it is left untouched."""


def default_store_path() -> Path:
    """``<user data dir>/ldpstream/device-store.json`` (``platformdirs``: e.g.
    ``~/.local/share`` or ``$XDG_DATA_HOME`` on Linux, ``~/Library/Application Support``
    on macOS, ``%LOCALAPPDATA%`` on Windows) — the path the TypeScript SDK uses in Node."""
    import platformdirs

    return Path(platformdirs.user_data_dir("ldpstream", appauthor=False)) / "device-store.json"


def empty_document() -> dict[str, Any]:
    return {"format": STORE_FORMAT, "version": STORE_VERSION, "collections": {},
            "outbox": [], "dropped": 0, "refused": 0, "not_before": None}


def check_document(doc: Any, where: str) -> dict[str, Any]:
    """``doc`` if it is a device store document (missing counters filled in), else
    :class:`StoreError`."""
    if (not isinstance(doc, dict) or doc.get("format") != STORE_FORMAT
            or doc.get("version") != STORE_VERSION):
        if isinstance(doc, dict) and doc.get("format") == "ldpstream-device-memo":
            raise StoreError(f"{where} is a memo file of SDK 0.1 (it holds true values and "
                             "randomly drawn answers): delete it; the device then derives "
                             "its permanent answers from a new secret")
        raise StoreError(f"{where} is not a {STORE_FORMAT} v{STORE_VERSION} document")
    base = empty_document()
    for key, value in base.items():
        doc.setdefault(key, value)
    if not isinstance(doc["collections"], dict) or not isinstance(doc["outbox"], list):
        raise StoreError(f"{where}: 'collections' must be an object and 'outbox' a list")
    return doc


class DeviceStore:
    """The device's private state, changed only through :meth:`transact`.

    Parameters
    ----------
    queue_limit : int
        Largest number of reports the outbox keeps (oldest dropped first).
    """

    def __init__(self, *, queue_limit: int = QUEUE_LIMIT) -> None:
        if not isinstance(queue_limit, int) or queue_limit < 1:
            raise ValueError(f"queue_limit must be an integer >= 1, got {queue_limit!r}")
        self.queue_limit = queue_limit

    # ---- the one primitive -----------------------------------------------------------------
    def transact(self, fn: Callable[[dict[str, Any]], T]) -> T:
        """Run ``fn`` on the document under the store's exclusive lock and save what it
        changed: no other thread or process reads or writes in between."""
        raise NotImplementedError

    def snapshot(self) -> dict[str, Any]:
        """A copy of the document (read under the lock)."""
        return self.transact(copy.deepcopy)

    # ---- what the SDK keeps ------------------------------------------------------------------
    def secret(self, make: Callable[[], bytes] | None = None) -> bytes:
        """The device secret, drawn once (``make``, default 32 bytes of ``os.urandom``) by
        whichever caller comes first; every later caller gets the same."""

        def get(doc: dict[str, Any]) -> str:
            if not isinstance(doc.get("secret"), str):
                raw = (make or (lambda: os.urandom(SECRET_BYTES)))()
                if not 16 <= len(raw) <= 64:
                    raise ValueError("a device secret must be 16 to 64 bytes")
                doc["secret"] = raw.hex()
            return str(doc["secret"])

        try:
            return bytes.fromhex(self.transact(get))
        except ValueError as exc:
            raise StoreError(f"the store's secret is not hex: {exc}") from None

    def outbox(self) -> list[dict[str, Any]]:
        """The queued reports, oldest first."""
        return list(self.snapshot()["outbox"])

    @property
    def dropped(self) -> int:
        """Reports dropped because the outbox was full."""
        return int(self.snapshot()["dropped"])

    @staticmethod
    def push(doc: dict[str, Any], entry: dict[str, Any], limit: int) -> None:
        """Append ``entry`` to the outbox of ``doc``, dropping the oldest beyond ``limit``."""
        box = doc["outbox"]
        box.append(entry)
        while len(box) > limit:
            box.pop(0)
            doc["dropped"] = int(doc.get("dropped", 0)) + 1


class MemoryStore(DeviceStore):
    """A store that keeps nothing across restarts: every new process is a new device.

    Only for apps that keep the secret elsewhere (pass ``secret=`` to the Device), tests
    and simulations: without a persistent secret a restarted app draws new permanent
    answers, and averaging them over restarts reveals the true value.
    """

    def __init__(self, *, queue_limit: int = QUEUE_LIMIT) -> None:
        super().__init__(queue_limit=queue_limit)
        self._doc = empty_document()
        self._lock = threading.RLock()

    def transact(self, fn: Callable[[dict[str, Any]], T]) -> T:
        with self._lock:
            work = copy.deepcopy(self._doc)
            out = fn(work)
            self._doc = work
            return out


_PATH_LOCKS: dict[str, threading.RLock] = {}
_PATH_LOCKS_GUARD = threading.Lock()


def _path_lock(path: Path) -> threading.RLock:
    key = os.path.realpath(path)
    with _PATH_LOCKS_GUARD:
        return _PATH_LOCKS.setdefault(key, threading.RLock())


@contextmanager
def _os_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` between processes: a POSIX record lock (``lockf``,
    which the JVM's ``FileChannel.lock`` also takes) or ``msvcrt.locking`` on Windows."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if sys.platform == "win32":  # pragma: no cover - not run in CI
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
        else:
            import fcntl

            fcntl.lockf(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


class FileStore(DeviceStore):
    """The store in a JSON file (default :func:`default_store_path`).

    Parameters
    ----------
    path : path, optional
        The file (created with its directory on first change).
    queue_limit : int
        Largest number of queued reports.
    """

    def __init__(self, path: str | Path | None = None, *,
                 queue_limit: int = QUEUE_LIMIT) -> None:
        super().__init__(queue_limit=queue_limit)
        self.path = Path(path) if path is not None else default_store_path()
        self.lock_path = self.path.with_name(self.path.name + ".lock")

    def __repr__(self) -> str:
        return f"FileStore({str(self.path)!r})"

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return empty_document()
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise StoreError(f"{self.path} is not JSON: {exc}") from None
        return check_document(doc, str(self.path))

    def _write(self, doc: dict[str, Any]) -> None:
        fd, tmp = tempfile.mkstemp(prefix=".store-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, separators=(",", ":"))
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def transact(self, fn: Callable[[dict[str, Any]], T]) -> T:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with _path_lock(self.path), _os_lock(self.lock_path):
            doc = self._read()
            before = json.dumps(doc, sort_keys=True)
            out = fn(doc)
            if json.dumps(doc, sort_keys=True) != before:
                self._write(doc)
            return out
