"""Stand-ins for what a driver hands the accumulator: consumed records, and a broker whose
log starts at ``start`` (every record present above it) and whose dead-letter topic
acknowledges at once."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Rec:
    """A consumed record (aiokafka's fields: timestamps in milliseconds)."""

    partition: int
    offset: int
    value: bytes | None
    topic: str = "t"
    key: bytes | None = b"lr"
    timestamp: int = field(default=1_700_000_000_000)


class Log:
    """A :class:`~aggregator.accumulator.Broker` without Kafka: seeks and dead letters are
    recorded; the group's committed offset is ``commit_at``."""

    def __init__(self) -> None:
        self.start = 0
        self.end = 1 << 40
        self.commit_at: int | None = 0
        self.seeks: list[dict[int, int]] = []
        self.dead: list[tuple[bytes, bytes | None, dict[str, bytes]]] = []

    async def committed(self, partition: int) -> int | None:
        return self.commit_at

    async def seek(self, offsets: Mapping[int, int]) -> None:
        self.seeks.append(dict(offsets))

    async def commit(self, offsets: Mapping[int, int]) -> None:
        pass

    async def log_start(self, partition: int) -> int:
        return self.start

    async def log_end(self, partition: int) -> int:
        return self.end

    async def next_offset(self, partition: int, offset: int) -> int | None:
        return max(offset, self.start)

    async def send_dead_letter(self, value: bytes, key: bytes | None,
                               headers: list[tuple[str, bytes]]) -> Any:
        self.dead.append((value, key, dict(headers)))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done
