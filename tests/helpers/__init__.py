"""The tests' toolkit, one copy of each: fake LLM servers speaking the OpenAI and Anthropic wire
protocols (:mod:`helpers.servers`), a scripted judge (:mod:`helpers.scripted`) and
:func:`wait_for` for background work. Import as ``from helpers import wait_for``."""

from __future__ import annotations

import time
from typing import Callable

__all__ = ["wait_for"]


def wait_for(cond: Callable[[], object], timeout: float = 10.0, interval: float = 0.01) -> bool:
    """Poll ``cond`` until it is true or ``timeout`` seconds passed; returns its last value's truth."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(interval)
    return bool(cond())
