"""Are the watermarks durably counted?  The janitor's proof, one strategy per Redis setting.

The janitor (:mod:`ldpstream.retention`) deletes the broker records at or below the Redis
watermarks.  That is safe only for a watermark Redis cannot lose: if Redis came back
below a released offset (a machine crash loses what was written after the last
completed fsync), the records between would be gone from Kafka *and* from the counts.
:class:`DurableWatermarks` answers "which watermarks are on disk (and on the replicas)?"
once per janitor round, with the strongest proof the Redis it talks to allows:

``fsync-always`` (``appendfsync always``)
    Redis fsyncs the AOF before it answers, so the snapshot's answer proves that every
    write before it is on disk.
``fsync-margin`` (``appendfsync everysec``, the compose and Helm setting)
    A snapshot is released once it is :data:`FSYNC_MARGIN_S` old, if Redis shows that
    an fsync must have started after it and completed: no fsync was in progress when it
    was taken nor is one now (``aof_pending_bio_fsync``), no fsync was delayed meanwhile
    (``aof_delayed_fsync``, counted when a write stops waiting for a slow fsync), no
    AOF rewrite ran (``aof_rewrites``, ``aof_rewrite_in_progress``), the last write
    succeeded, and Redis did not restart (``run_id``).  Everysec starts an fsync within
    a second of a write, and a write waits at most two seconds for one in progress
    before it counts as delayed: 5 s covers both.
``WAITAOF`` (Redis ≥ 7.2, Valkey), where ``CONFIG GET`` is not allowed
    The snapshot script reads the watermarks *and writes* a marker (``P janitor`` field
    ``snap``): WAITAOF waits for the calling client's own writes, hence the marker.
    ``WAITAOF 1 0`` confirms that the hidden fsync policy fsyncs at all (then the margin
    still applies).  WAITAOF alone is *not* taken as proof under ``everysec``: Redis
    7.2.2–7.4.2 and Valkey answer it as soon as the write is in the AOF if the last
    fsync started less than a second ago (redis/redis#13793); the fault suite's janitor
    test released records this way before the margin replaced it.
``none``
    AOF off, ``appendfsync no`` (the OS decides when to write), or no WAITAOF and no
    ``CONFIG GET`` (a managed Redis): nothing can be proven and the janitor refuses to
    release (``/readyz``, ``ldp_janitor_releasing``).

**Replicas** (``LDP_RELEASE_REPLICAS`` = ``R`` > 0; 1 by default with Sentinel): on top
of the strategy above, the snapshot must be acknowledged by ``R`` replicas.  The snapshot
script and ``WAIT R timeout`` go in one pipeline, on one connection: the replication
stream is ordered, so a replica that has the marker has every flush before it.  A
snapshot the replicas do not acknowledge in time is not released (``last_error`` says
how many did).  ``WAIT`` works on every Redis version; it proves the replica *received*
the writes, so a failover to it keeps every released watermark, and a replica is as
durable on its own disk as its own ``appendfsync`` (give replicas ``appendfsync always``
where a replica's own crash must not lose them either).

The check is one method, :meth:`DurableWatermarks.durable`; a strategy for another
topology (Redis Cluster) is one more branch there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .storage import DEFAULT_PREFIX, Keys

__all__ = ["DurableWatermarks", "FSYNC_MARGIN_S", "SNAPSHOT_SCRIPT", "Verdict"]

FSYNC_MARGIN_S = 5.0
"""Age (seconds) at which an ``everysec`` snapshot can be proven on disk (see above)."""

SNAPSHOT_SCRIPT = """
-- KEYS[1] = watermark hash, KEYS[2] = janitor hash; ARGV[1] = now (ms)
-- The write gives WAITAOF / WAIT an offset of this client to wait for.
redis.call('HSET', KEYS[2], 'snap', ARGV[1])
return redis.call('HGETALL', KEYS[1])
"""


@dataclass(frozen=True)
class Verdict:
    """One round's answer.

    ``watermarks``: partition -> watermark proven durable (None: nothing proven this
    round); ``strategy``: how (module docstring); ``releasing``: False when this Redis
    cannot prove durability at all (the janitor refuses and says so); ``reason``: why
    nothing is proven (empty when ``watermarks`` is set); ``error``: the reason is a
    failure (replicas short, WAITAOF timed out), not just a wait.
    """

    watermarks: dict[int, int] | None
    strategy: str
    releasing: bool
    reason: str = ""
    error: bool = False


@dataclass(frozen=True)
class _Snapshot:
    watermarks: dict[int, int]
    at: float
    run_id: str
    delayed_fsync: int
    rewrites: int


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class DurableWatermarks:
    """The watermarks of ``topic`` that Redis holds durably (see the module docstring).

    Parameters
    ----------
    redis
        A sync ``redis.Redis`` client of the aggregator's Redis (its primary).
    replicas
        Replicas that must acknowledge holding the snapshot (``WAIT``), waiting at most
        ``replica_wait_ms``.
    margin
        Seconds after which an ``everysec`` snapshot may be proven (:data:`FSYNC_MARGIN_S`).
    wait_timeout_ms
        How long WAITAOF waits for the fsync before the round gives up.
    clock
        Monotonic seconds (tests pass their own).
    """

    def __init__(self, redis: Any, topic: str, prefix: str = DEFAULT_PREFIX, *,
                 replicas: int = 0, replica_wait_ms: int = 1000,
                 margin: float = FSYNC_MARGIN_S, wait_timeout_ms: int = 5000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if replicas < 0:
            raise ValueError(f"replicas must be >= 0, got {replicas}")
        self.redis, self.topic, self.keys = redis, topic, Keys.for_client(redis, prefix)
        self.replicas, self.replica_wait_ms = replicas, replica_wait_ms
        self.margin = margin
        self.wait_timeout_ms, self.clock = wait_timeout_ms, clock
        self._script: Any = None
        self._waitaof: bool | None = None  # None until tried
        self._pending: _Snapshot | None = None

    # -- Redis -------------------------------------------------------------------------
    def _snapshot(self) -> tuple[dict[int, int], str]:
        """Read the watermarks (writing the marker); with replicas, ``WAIT`` for them on
        the same connection.  Returns the watermarks and "" or, replicas short, ({}, why)."""
        if self._script is None:
            self._script = self.redis.register_script(SNAPSHOT_SCRIPT)
        keys = [self.keys.watermarks(self.topic), self.keys.janitor]
        args = [int(time.time() * 1000)]
        if self.replicas > 0:
            pipe = self.redis.pipeline(transaction=False)
            self._script(keys=keys, args=args, client=pipe)
            pipe.execute_command("WAIT", self.replicas, self.replica_wait_ms)
            flat, acked = pipe.execute()
            if int(acked) < self.replicas:
                return {}, (f"{acked} of {self.replicas} Redis replica(s) acknowledged "
                            f"within {self.replica_wait_ms} ms")
        else:
            flat = self._script(keys=keys, args=args)
        pairs = zip(flat[0::2], flat[1::2], strict=True)
        return {int(_text(k)): int(_text(v)) for k, v in pairs if ":" not in _text(k)}, ""

    def _info(self) -> dict[str, str]:
        raw = self.redis.execute_command("INFO", "persistence")
        text = _text(raw) if isinstance(raw, (bytes, str)) else None
        info: dict[str, str] = {}
        if text is None:  # redis-py parsed it already
            info = {k: str(v) for k, v in raw.items()}
        else:
            for line in text.splitlines():
                k, sep, v = line.partition(":")
                if sep:
                    info[k.strip()] = v.strip()
        server = self.redis.execute_command("INFO", "server")
        run_id = server.get("run_id") if isinstance(server, dict) else None
        if run_id is None:
            for line in _text(server).splitlines():
                if line.startswith("run_id:"):
                    run_id = line.split(":", 1)[1].strip()
        info["run_id"] = str(run_id or "")
        return info

    def _config(self, name: str) -> str | None:
        """``CONFIG GET name``, None where CONFIG is not allowed (managed Redis)."""
        from redis.exceptions import ResponseError

        try:
            res = self.redis.config_get(name)
        except ResponseError:
            return None
        value = res.get(name) if isinstance(res, dict) else None
        return None if value is None else _text(value)

    # -- the proof ---------------------------------------------------------------------
    def durable(self) -> Verdict:
        """The watermarks proven on disk now (see the module docstring); one round."""
        if self.keys.sharded:
            # the proof reads one server's AOF state; a cluster's watermarks live on
            # several primaries, each needing its own proof: not done, so nothing released
            return Verdict(None, "none", False,
                           "Redis Cluster: proving the watermarks durable on every primary "
                           "is not implemented; counted records stay on the broker (its own "
                           "retention applies)")
        fsync = self._config("appendfsync")
        if fsync == "no":
            return Verdict(None, "none", False,
                           "appendfsync no: the OS decides when the AOF reaches the disk")
        at = self.clock()
        before = self._info()
        if before.get("aof_enabled") != "1":
            return Verdict(None, "none", False,
                           "appendonly is off: Redis keeps no log to fsync")
        if fsync is None and self._waitaof is False:
            return self._no_proof()
        if fsync == "always":
            wms, short = self._snapshot()  # answered after the fsync of all before it
            if short:
                return Verdict(None, "fsync-always", True, short, error=True)
            if str(self._info().get("aof_last_write_status")) != "ok":
                return Verdict(None, "fsync-always", True, "the last AOF write failed")
            return Verdict(wms, "fsync-always", True)
        if fsync not in (None, "everysec"):
            return Verdict(None, "none", False, f"unknown appendfsync {fsync!r}")
        return self._margin(before, at, wait=fsync is None)

    def _no_proof(self) -> Verdict:
        return Verdict(None, "none", False,
                       "CONFIG GET is not allowed and there is no WAITAOF: the fsync policy "
                       "is unknown")

    def _wait_aof(self) -> Verdict | None:
        """WAITAOF (local fsync) for the snapshot just written: None when confirmed, else
        why not."""
        from redis.exceptions import ResponseError

        try:
            local, _ = self.redis.execute_command("WAITAOF", 1, 0, self.wait_timeout_ms)
        except ResponseError as exc:
            if "unknown command" not in str(exc).lower():
                raise
            self._waitaof = False
            return self._no_proof()
        self._waitaof = True
        if int(local) >= 1:
            return None
        return Verdict(None, "fsync-margin", True,
                       f"WAITAOF did not confirm the snapshot within {self.wait_timeout_ms} "
                       "ms", error=True)

    def _margin(self, before: dict[str, str], at: float, wait: bool) -> Verdict:
        """``before``: INFO read at ``at`` (the proof of the pending snapshot, and the
        baseline of the next one, which is taken after it).  ``wait``: a new snapshot
        must first be confirmed by WAITAOF (an fsync policy CONFIG hides)."""
        pend, released, reason = self._pending, None, ""
        if pend is not None:
            if (before.get("run_id") != pend.run_id
                    or int(before.get("aof_delayed_fsync", -1)) != pend.delayed_fsync
                    or int(before.get("aof_rewrites", -1)) != pend.rewrites):
                reason = ("Redis restarted, delayed an fsync or rewrote its AOF since the "
                          "snapshot: starting over")
                self._pending = pend = None
            elif at - pend.at < self.margin:
                reason = f"waiting until the snapshot is {self.margin:g} s old"
            elif not self._quiet(before):
                reason = "an fsync is in progress or the last AOF write failed"
            else:
                released, self._pending = pend.watermarks, None
        if self._pending is None and self._quiet(before):
            wms, short = self._snapshot()
            if short:  # not pending: the replicas must acknowledge a later snapshot
                if released is not None:
                    return Verdict(released, "fsync-margin", True)
                return Verdict(None, "fsync-margin", True, short, error=True)
            waited = self._wait_aof() if wait else None
            if waited is not None:
                return waited if released is None else Verdict(released, "fsync-margin", True)
            self._pending = _Snapshot(wms, self.clock(), before.get("run_id", ""),
                                      int(before.get("aof_delayed_fsync", -1)),
                                      int(before.get("aof_rewrites", -1)))
        elif self._pending is None:
            reason = reason or "an fsync is in progress: no snapshot this round"
        return Verdict(released, "fsync-margin", True, "" if released is not None else reason)

    @staticmethod
    def _quiet(info: dict[str, str]) -> bool:
        """No fsync pending, no AOF rewrite running, the last write succeeded."""
        return (str(info.get("aof_pending_bio_fsync")) == "0"
                and str(info.get("aof_rewrite_in_progress")) == "0"
                and str(info.get("aof_last_write_status")) == "ok")
