"""Internal: Plug-in local grounding models: a sentence-pair classifier that says whether a passage entails a claim.

:class:`GroundingModel` runs an NLI cross-encoder, or a grounding model of the HHEM / MiniCheck
kind, on this machine: with transformers on PyTorch, or with ONNX Runtime (a folder holding
``model.onnx`` or ``onnx/model.onnx``, ``tokenizer.json`` and ``config.json``), on the CPU or a
GPU (``device="auto"``: CUDA when PyTorch or ONNX Runtime sees one). Given (passage, claim) pairs
it returns the probability that the passage entails the claim and, when the model has such a label,
that it contradicts it. The labels are read from the model's ``config.json`` (``id2label``): a
label naming entailment ("entailment", "ENTAILMENT", "entailed", "supported", "consistent") and
one naming contradiction ("contradiction", "refuted"); a model with one output (HHEM's
consistency score) gives the entailment probability as ``sigmoid(logit)``; ``labels=`` names the
indices when the config's names say nothing ("LABEL_0").

Nothing is downloaded: a folder is read with ``local_files_only``; a hub name is looked up in the
local Hugging Face cache only (``snapshot_download(..., local_files_only=True)``), whatever
``HF_HUB_OFFLINE`` says. No such model ships with ragmeter (none with a redistributable license is on the package
registries): bring your own (``pip install "ragmeter[grounding]"`` for transformers,
``"ragmeter[grounding-onnx]"`` for ONNX Runtime).

In the offline judge (``OfflineJudge(grounding=...)``) the two probabilities of each claim against
its best passage are signals of the claim-support combination (:mod:`ragmeter.judges.offline.model`):
with coefficients fit on labels (``benchmarks/fit_offline.py --grounding MODEL --out fit.json``,
then ``combinations="fit.json"``), they enter the fitted model; without, a documented default
weighting applies (:func:`default_weighting`).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "GroundingModel",
    "choose_device",
    "label_indices",
    "default_weighting",
    "INSTALL_HINT",
    "ONNX_INSTALL_HINT",
]

INSTALL_HINT = 'pip install "ragmeter[grounding]" (and PyTorch)'
ONNX_INSTALL_HINT = 'pip install "ragmeter[grounding-onnx]"'
_ENTAILMENT = ("entail", "support", "consistent", "faithful", "grounded", "attributable")
_NOT = ("not", "non", "un", "in", "no_")
_CONTRADICTION = ("contradict", "refute")


def _names(label: str) -> str:
    return label.strip().lower().replace("-", "_").replace(" ", "_")


def label_indices(
    id2label: Mapping[Any, str], num_labels: int, labels: Mapping[str, int] | None = None
) -> tuple[int | None, int | None]:
    """(entailment index, contradiction index) of a classifier's outputs from its ``id2label``:
    the label naming entailment (not its negation: "not_entailment" is none) and the one naming
    contradiction (None when there is none); ``labels`` ({"entailment": i, "contradiction": j})
    overrides. A one-output model gives (None, None): its logit is the entailment score.

    >>> label_indices({0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}, 3)
    (0, 2)
    >>> label_indices({0: "not_entailment", 1: "entailment"}, 2)
    (1, None)
    """
    if labels:
        unknown = set(labels) - {"entailment", "contradiction"}
        if unknown or "entailment" not in labels:
            raise ValueError(f"labels= takes 'entailment' (required) and 'contradiction' indices, got {dict(labels)}")
        ent, con = int(labels["entailment"]), labels.get("contradiction")
        for i in (ent, con):
            if i is not None and not 0 <= int(i) < num_labels:
                raise ValueError(f"labels=: index {i} is out of range for a model with {num_labels} outputs")
        return ent, (int(con) if con is not None else None)
    if num_labels == 1:
        return None, None
    table = {int(k): _names(v) for k, v in id2label.items()}
    entail = [
        i
        for i, n in table.items()
        if any(w in n for w in _ENTAILMENT) and not any(n.startswith(p) for p in _NOT) and "contradict" not in n
    ]
    contra = [i for i, n in table.items() if any(w in n for w in _CONTRADICTION)]
    if len(entail) != 1:
        raise ValueError(
            f"cannot tell which output means entailment from the model's labels {dict(id2label)}; "
            f"pass labels={{'entailment': INDEX, 'contradiction': INDEX or None}}"
        )
    return entail[0], (contra[0] if len(contra) == 1 else None)


def choose_device(device: str, cuda_available: bool) -> str:
    """The device to run on: ``"auto"`` is ``"cuda"`` when CUDA is available, else ``"cpu"``;
    ``"cpu"`` stays; ``"cuda"`` / ``"cuda:N"`` needs CUDA (ValueError naming what is missing).

    >>> choose_device("auto", False), choose_device("auto", True), choose_device("cpu", True)
    ('cpu', 'cuda', 'cpu')
    """
    if not isinstance(device, str) or not (device in ("auto", "cpu", "cuda") or device.startswith("cuda:")):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if device == "auto":
        return "cuda" if cuda_available else "cpu"
    if device.startswith("cuda") and not cuda_available:
        raise ValueError(
            f"device={device!r} but no CUDA device is available here (a CPU build of PyTorch or "
            f"ONNX Runtime without the CUDA provider?); use device='cpu' or 'auto'"
        )
    return device


def default_weighting(score: float, entailment: float, contradiction: float) -> float:
    """A claim's score with a grounding model when the combination has no coefficients for it:
    the mean of the combination's score and the entailment probability, times ``1 - contradiction``
    when the model is confident of a contradiction (``contradiction >= 0.5`` and above the
    entailment probability).

    >>> default_weighting(0.8, 0.9, 0.05), default_weighting(1.0, 0.1, 0.8)
    (0.85, 0.11)
    """
    value = 0.5 * score + 0.5 * entailment
    if contradiction >= 0.5 and contradiction > entailment:
        value *= 1.0 - contradiction
    return round(min(1.0, max(0.0, value)), 4)


def _softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=1, keepdims=True)


def _onnx_file(folder: Path) -> Path | None:
    for candidate in (folder / "model.onnx", folder / "onnx" / "model.onnx"):
        if candidate.is_file():
            return candidate
    return None


def _cached_snapshot(name: str) -> str:
    """The folder of hub model ``name`` in the local Hugging Face cache; never a download
    (``LocalEntryNotFoundError`` when it is not there), whatever ``HF_HUB_OFFLINE`` says."""
    from huggingface_hub import snapshot_download

    return snapshot_download(name, local_files_only=True)


class GroundingModel:
    """A local sentence-pair classifier: :meth:`predict` gives, per (passage, claim) pair, the
    probability that the passage entails the claim and that it contradicts it (0 when the model
    has no contradiction label).

    ``model``: a folder or a hub name (looked up in the local cache, never fetched when
    ``HF_HUB_OFFLINE=1``). ``backend``: ``"auto"`` (ONNX Runtime when the folder holds
    ``model.onnx``, else transformers), ``"transformers"`` or ``"onnx"``. ``device``: ``"auto"``,
    ``"cpu"``, ``"cuda"`` (:func:`choose_device`). Pairs are run ``batch_size`` at a time, cut at
    ``max_length`` tokens (the passage is cut first). ``labels``: the output indices when the
    config's label names say nothing (:func:`label_indices`). The model loads on first use, once,
    under a lock; :meth:`predict` is thread-safe.
    """

    def __init__(
        self,
        model: str | os.PathLike,
        *,
        backend: str = "auto",
        device: str = "auto",
        batch_size: int = 16,
        max_length: int = 512,
        labels: Mapping[str, int] | None = None,
        trust_remote_code: bool = False,
    ):
        if backend not in ("auto", "transformers", "onnx"):
            raise ValueError(f"backend must be 'auto', 'transformers' or 'onnx', got {backend!r}")
        if batch_size < 1 or max_length < 8:
            raise ValueError("batch_size must be >= 1 and max_length >= 8")
        self.model = str(model)
        self.folder = Path(self.model) if Path(self.model).is_dir() else None
        if backend == "auto":
            backend = "onnx" if self.folder is not None and _onnx_file(self.folder) else "transformers"
        if backend == "onnx" and (self.folder is None or _onnx_file(self.folder) is None):
            raise ValueError(
                f"backend='onnx' needs a folder holding model.onnx (or onnx/model.onnx), got {self.model!r}"
            )
        self.backend = backend
        choose_device(device, cuda_available=True)  # the spelling is checked now, CUDA when the model loads
        self.requested_device = device
        self.batch_size = int(batch_size)
        self.max_length = int(max_length)
        self.override = dict(labels) if labels else None
        self.trust_remote_code = bool(trust_remote_code)
        self.label = self.folder.name if self.folder is not None else self.model
        self.name = f"grounding:{self.label}"
        self._loaded: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GroundingModel({self.model!r}, backend={self.backend!r}, device={self.requested_device!r})"

    @property
    def device(self) -> str:
        """The device the model runs on (loads it)."""
        return self._load()["device"]

    @property
    def indices(self) -> tuple[int | None, int | None]:
        """(entailment, contradiction) output indices, from the config (loads it)."""
        return self._load()["indices"]

    def _load(self) -> dict[str, Any]:
        if self._loaded is not None:
            return self._loaded
        with self._lock:
            if self._loaded is None:
                self._loaded = self._load_onnx() if self.backend == "onnx" else self._load_transformers()
        return self._loaded

    def _load_transformers(self) -> dict[str, Any]:
        try:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as err:
            raise ImportError(
                f"GroundingModel({self.model!r}) needs transformers and PyTorch: {INSTALL_HINT}  "
                f"[{type(err).__name__}: {err}]"
            ) from err
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        kwargs: dict[str, Any] = {"trust_remote_code": self.trust_remote_code, "local_files_only": True}
        source = self.model if self.folder is not None else _cached_snapshot(self.model)
        device = choose_device(self.requested_device, torch.cuda.is_available())
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        model = AutoModelForSequenceClassification.from_pretrained(source, **kwargs).to(device).eval()
        config = model.config
        indices = label_indices(config.id2label or {}, int(config.num_labels), self.override)
        return {"device": device, "indices": indices, "tokenizer": tokenizer, "model": model, "torch": torch}

    def _load_onnx(self) -> dict[str, Any]:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as err:
            raise ImportError(
                f"GroundingModel({self.model!r}, backend='onnx') needs ONNX Runtime and tokenizers: "
                f"{ONNX_INSTALL_HINT}  [{type(err).__name__}: {err}]"
            ) from err
        assert self.folder is not None
        config_file = self.folder / "config.json"
        tokenizer_file = self.folder / "tokenizer.json"
        for f in (config_file, tokenizer_file):
            if not f.is_file():
                raise ValueError(f"GroundingModel({self.model!r}): {f.name} is missing from the folder")
        config = json.loads(config_file.read_text(encoding="utf-8"))
        id2label = config.get("id2label") or {}
        num_labels = int(config.get("num_labels") or len(id2label) or 2)
        indices = label_indices(id2label, num_labels, self.override)
        device = choose_device(self.requested_device, "CUDAExecutionProvider" in ort.get_available_providers())
        providers = (
            ["CUDAExecutionProvider", "CPUExecutionProvider"] if device.startswith("cuda") else ["CPUExecutionProvider"]
        )
        session = ort.InferenceSession(str(_onnx_file(self.folder)), providers=providers)
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        tokenizer.enable_truncation(self.max_length, strategy="only_first")
        pad = config.get("pad_token_id")
        tokenizer.enable_padding(pad_id=int(pad) if pad is not None else 0)
        inputs = [i.name for i in session.get_inputs()]
        return {
            "device": device,
            "indices": indices,
            "tokenizer": tokenizer,
            "session": session,
            "inputs": inputs,
        }

    def logits(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The model's raw outputs for ``pairs`` (passage, claim), shape ``(len(pairs), outputs)``,
        computed ``batch_size`` pairs at a time."""
        loaded = self._load()
        out = []
        for start in range(0, len(pairs), self.batch_size):
            batch = list(pairs[start : start + self.batch_size])
            out.append(self._onnx_batch(loaded, batch) if self.backend == "onnx" else self._torch_batch(loaded, batch))
        width = out[0].shape[1] if out else 1
        return np.concatenate(out).astype(np.float64) if out else np.zeros((0, width))

    def _torch_batch(self, loaded: dict, batch: list[tuple[str, str]]) -> np.ndarray:
        torch = loaded["torch"]
        enc = loaded["tokenizer"](
            [p for p, _ in batch],
            [c for _, c in batch],
            truncation="only_first",
            max_length=self.max_length,
            padding=True,
            return_tensors="pt",
        )
        enc = {k: v.to(loaded["device"]) for k, v in enc.items()}
        with self._lock, torch.inference_mode():
            return loaded["model"](**enc).logits.float().cpu().numpy()

    def _onnx_batch(self, loaded: dict, batch: list[tuple[str, str]]) -> np.ndarray:
        encodings = loaded["tokenizer"].encode_batch(batch)
        feeds = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        with self._lock:
            return loaded["session"].run(None, {k: v for k, v in feeds.items() if k in loaded["inputs"]})[0]

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Per (passage, claim) pair: [P(entailment), P(contradiction)], shape ``(len(pairs), 2)``
        (softmax over the outputs; a one-output model: sigmoid of its logit, contradiction 0)."""
        pairs = [(str(p), str(c)) for p, c in pairs]
        if not pairs:
            return np.zeros((0, 2))
        logits = self.logits(pairs)
        ent, con = self.indices
        if logits.shape[1] == 1:
            return np.column_stack([1.0 / (1.0 + np.exp(-logits[:, 0])), np.zeros(len(pairs))])
        probs = _softmax(logits)
        return np.column_stack([probs[:, ent], probs[:, con] if con is not None else np.zeros(len(pairs))])

    async def apredict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """:meth:`predict` in a worker thread (the event loop is not blocked)."""
        return await asyncio.to_thread(self.predict, pairs)
