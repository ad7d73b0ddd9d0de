"""Internal: Embeddings for the offline judge: a hashed bag-of-words vectoriser (no model) and unit vectors
from whichever embedder the judge uses."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from ragmeter.judges.base import Embedder, Usage
from ragmeter.judges.offline.text import content_words


def _hash(token: str) -> int:
    return zlib.crc32(token.encode("utf-8"))


class LexicalEmbedder(Embedder):
    """A deterministic hashed bag-of-words + character-trigram vectoriser (no model, no torch).

    Each text becomes an L2-normalised vector of ``dim`` floats: stemmed content words weigh 1,
    character trigrams of each word 0.3, hashed with CRC-32 (stable across processes). Texts
    sharing words or word pieces get a positive cosine; unrelated texts get ~0.

    >>> import asyncio
    >>> v, usage = asyncio.run(LexicalEmbedder().embed(["rising prices", "prices rose", "blue whale"]))
    >>> v.shape, float(v[0] @ v[1]) > 0.3, abs(float(v[0] @ v[2])) < 0.2
    ((3, 512), True, True)
    """

    name = "lexical-hash"

    def __init__(self, dim: int = 512):
        self.dim = int(dim)

    def vector(self, text: str) -> np.ndarray:
        """The vector of one text."""
        v = np.zeros(self.dim, dtype=np.float32)
        for w in content_words(text):
            h = _hash(w)
            v[h % self.dim] += 1.0 if (h >> 16) & 1 else -1.0
            padded = f"<{w}>"
            for i in range(len(padded) - 2):
                g = _hash("#" + padded[i : i + 3])
                v[g % self.dim] += 0.3 if (g >> 16) & 1 else -0.3
        norm = float(np.linalg.norm(v))
        return v / norm if norm else v

    async def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, Usage]:
        """Vectors for ``texts`` (shape ``(len(texts), dim)``); costs nothing."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), Usage()
        return np.stack([self.vector(t) for t in texts]), Usage()


def local_embeddings_available() -> bool:
    """Whether the ``local`` extra (the packaged MiniLM model) is installed, checked without
    importing it (:func:`ragmeter.judges.local.available`)."""
    from ragmeter.judges.local import available

    return available()


async def unit_vectors(embedder: Embedder | None, texts: list[str]) -> dict[str, np.ndarray]:
    """Embedding vectors (unit norm) for ``texts`` from one call, or {} without an embedder."""
    if embedder is None or not texts:
        return {}
    unique = list(dict.fromkeys(texts))
    vectors, _ = await embedder.embed(unique)
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    vectors = vectors / norms
    return dict(zip(unique, vectors))
