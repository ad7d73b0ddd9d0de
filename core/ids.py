"""Internal: Chunk ids for chunks that carry none: a stable id made from the chunk's text.

Retrieval metrics compare the ids of the retrieved chunks with ``relevant_ids``. Some sources
record a chunk's text but not its id (OpenInference's LangChain instrumentation records
``Document.metadata`` but not ``Document.id``). Such a chunk can be given a *content-hash id*:

``content_id(text)`` = ``"sha256:"`` + the first 16 hex digits of the SHA-256 of the text's UTF-8
bytes, exactly as recorded (no normalisation). The same text always gets the same id, so
``relevant_ids`` made with :func:`content_id` from the texts of the relevant chunks match. A
context given such an id is marked ``metadata["id_source"] == "content_hash"``
(:data:`ID_SOURCE_KEY`, :data:`CONTENT_HASH`); the retrieval metrics say so in their
explanation.

>>> content_id("Paris is the capital of France.")
'sha256:557be7eca214f188'
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

__all__ = ["content_id", "is_content_id", "content_hashed", "ID_SOURCE_KEY", "CONTENT_HASH", "PREFIX"]

#: The context metadata key that says where a chunk's id came from.
ID_SOURCE_KEY = "id_source"
#: Its value for an id made by :func:`content_id`.
CONTENT_HASH = "content_hash"
#: What every content-hash id starts with.
PREFIX = "sha256:"


def content_id(text: str) -> str:
    """The content-hash id of a chunk's text (see the module docstring)."""
    if not isinstance(text, str):
        raise TypeError(f"content_id needs the chunk's text (a string), got {type(text).__name__}")
    return PREFIX + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def is_content_id(value: Any) -> bool:
    """Whether ``value`` has the form of a :func:`content_id`."""
    if not isinstance(value, str) or not value.startswith(PREFIX) or len(value) != len(PREFIX) + 16:
        return False
    return all(c in "0123456789abcdef" for c in value[len(PREFIX) :])


def content_hashed(contexts: Iterable[Any]) -> int:
    """How many of ``contexts`` (:class:`ragmeter.Context`) carry a content-hash id."""
    return sum(1 for c in contexts if (getattr(c, "metadata", None) or {}).get(ID_SOURCE_KEY) == CONTENT_HASH)
