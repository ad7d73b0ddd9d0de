"""The tests' toolkit, one copy of each: fake LLM servers speaking the OpenAI and Anthropic wire
protocols (:mod:`helpers.servers`), a scripted judge (:mod:`helpers.scripted`) and
:func:`wait_for` for background work, :class:`FakeClock` for backoff and rate limits. Import as
``from helpers import wait_for``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

__all__ = ["ROOT", "TESTS", "wait_for", "FakeClock", "cancel_when_lines"]

#: The tests folder (``tests/``, where ``data/`` and ``helpers/`` are) and the repository root above it.
TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def wait_for(cond: Callable[[], object], timeout: float = 10.0, interval: float = 0.01) -> bool:
    """Poll ``cond`` until it is true or ``timeout`` seconds passed; returns its last value's truth."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(interval)
    return bool(cond())


class FakeClock:
    """Virtual time for rate limits and backoff: ``sleep`` records the wait and moves the clock on
    at once (then yields to the loop), so a test asserts exact waits without waiting."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        """Record the wait and advance the clock by ``seconds``."""
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def cancel_when_lines(run: Callable[[], Awaitable[Any]], out: Path, lines: int, poll: float = 0.01) -> None:
    """Run the coroutine ``run()`` and cancel it once ``out`` holds ``lines`` lines (a streamed
    run interrupted midway); it must end cancelled."""

    async def go() -> None:
        task = asyncio.ensure_future(run())
        while not out.exists() or len(out.read_text().splitlines()) < lines:
            await asyncio.sleep(poll)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
