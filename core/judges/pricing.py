"""Internal: What judge work costs: list prices per model family and the cost of a request's tokens."""

from __future__ import annotations

import re

__all__ = ["PRICES", "price_for", "cost_of"]

#: USD per 1M tokens: (input, output). Embedding models have output 0.
PRICES: dict[str, tuple[float, float]] = {
    # OpenAI chat
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "o1": (15.00, 60.00),
    "o1-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    # Anthropic
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-3-opus": (15.00, 75.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-sonnet-4-0": (3.00, 15.00),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
    "claude-opus-4-0": (15.00, 75.00),
    "claude-opus-4-1": (15.00, 75.00),
    "claude-opus-4-5": (5.00, 25.00),
    # OpenAI embeddings
    "text-embedding-3-small": (0.02, 0.0),
    "text-embedding-3-large": (0.13, 0.0),
    "text-embedding-ada-002": (0.10, 0.0),
}

_SUFFIX = re.compile(r"^(-\d{4}-\d{2}-\d{2}|-\d{8}|-latest|-preview)?(-v\d+(:\d+)?)?$")


def price_for(model: str) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens for ``model``, or None when unknown.

    Dated snapshots and aliases match their family (``gpt-4o-mini-2024-07-18``,
    ``claude-3-5-haiku-20241022``, ``claude-3-7-sonnet-latest``); a provider prefix such as
    ``openai/`` or ``anthropic.`` is ignored.
    """
    name = model.strip().lower()
    name = name.rsplit("/", 1)[-1]
    if name.startswith("anthropic."):
        name = name[len("anthropic.") :]
    best = None
    for family in PRICES:
        if name.startswith(family) and _SUFFIX.match(name[len(family) :]):
            if best is None or len(family) > len(best):
                best = family
    return PRICES[best] if best else None


def cost_of(prices: tuple[float, float] | None, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Cost in USD of the tokens at ``prices`` (per 1M); None when ``prices`` is None or no token
    count is known (a backend that reports no usage)."""
    if prices is None or (prompt_tokens <= 0 and completion_tokens <= 0):
        return None
    return (prompt_tokens * prices[0] + completion_tokens * prices[1]) / 1_000_000
