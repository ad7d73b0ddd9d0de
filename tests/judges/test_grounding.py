"""Plug-in grounding models (issue 35, item 2): tiny random sentence-pair classifiers built in a
temporary folder (a real config.json, tokenizer files and safetensors weights, and an ONNX export),
loaded with transformers and with ONNX Runtime, never from the network."""

import asyncio
import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

# PyTorch, transformers, ONNX Runtime and onnx are outside the light test install: these tests are
# `heavy` (python -m pytest -m heavy, the .ci/run step that installs the dev extra), never skipped.
pytestmark = pytest.mark.heavy
try:
    import onnx
    import onnxruntime  # noqa: F401
    import torch
    import transformers
except ImportError:  # the light install collects this module and deselects its tests
    onnx = onnxruntime = torch = transformers = None

from ragmeter import Sample, evaluate  # noqa: E402
from ragmeter.judges.local import LocalEmbedder  # noqa: E402
from ragmeter.judges.offline import OfflineJudge  # noqa: E402
from ragmeter.judges.offline.grounding import (  # noqa: E402
    GroundingModel,
    choose_device,
    default_weighting,
    label_indices,
)

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    *"""the a an of in on is was not revenue rose fell
2021 museum opens at 9 am closes sky blue green cat sat mat paris capital france london city""".split(),
]
NLI = {0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}
PAIRS = [
    ("The museum opens at 9 am.", "The museum opens at 9 am."),
    ("Revenue rose in 2021.", "Revenue fell."),
    ("The sky is blue.", "The sky is green."),
    ("Paris is the capital of France.", "London is a city."),
    ("The cat sat on the mat.", "A cat sat."),
]


def build(
    folder: Path, id2label: dict, *, bias: list[float] | None = None, onnx_export: bool = False, seed: int = 0
) -> Path:
    """A tiny random BertForSequenceClassification saved with save_pretrained (config.json,
    model.safetensors, vocab.txt, tokenizer.json ...); ``bias`` sets the classifier's bias (with
    its weights zeroed, every pair gets softmax(bias)); optionally exported to ONNX beside it."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"))
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=len(id2label),
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config).eval()
    if bias is not None:
        with torch.no_grad():
            model.classifier.weight.zero_()
            model.classifier.bias.copy_(torch.tensor(bias))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if onnx_export:
        enc = tokenizer(["the cat sat"], ["on the mat"], return_tensors="pt")
        names = ["input_ids", "attention_mask", "token_type_ids"]
        with warnings.catch_warnings():  # the exporter's tracing chatter
            warnings.simplefilter("ignore")
            torch.onnx.export(
                model,
                tuple(enc[k] for k in names),
                str(folder / "model.onnx"),
                input_names=names,
                output_names=["logits"],
                opset_version=17,
                dynamo=False,
                dynamic_axes={**{k: {0: "batch", 1: "tokens"} for k in names}, "logits": {0: "batch"}},
            )
    return folder


def reference(folder: Path, pairs) -> np.ndarray:
    """Softmax probabilities computed directly with transformers, pair by pair."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(folder, local_files_only=True).eval()
    out = []
    with torch.no_grad():
        for p, c in pairs:
            out.append(torch.softmax(model(**tok(p, c, return_tensors="pt")).logits, -1)[0].numpy())
    return np.array(out)


@pytest.fixture(scope="module")
def nli(tmp_path_factory):
    return build(tmp_path_factory.mktemp("grounding") / "tiny-nli", NLI, onnx_export=True)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def test_the_folder_holds_real_model_files(nli):
    names = set(os.listdir(nli))
    assert {"config.json", "model.safetensors", "vocab.txt", "tokenizer.json", "model.onnx"} <= names
    assert json.loads((nli / "config.json").read_text())["id2label"] == {str(k): v for k, v in NLI.items()}


@pytest.mark.parametrize("backend", ["transformers", "onnx"])
def test_probabilities_are_the_models_softmax_read_by_label_in_any_batch_size(nli, backend):
    expected = reference(nli, PAIRS)
    for batch_size in (1, 2, 16):
        model = GroundingModel(nli, backend=backend, device="cpu", batch_size=batch_size)
        got = model.predict(PAIRS)
        assert got.shape == (5, 2)
        assert np.allclose(got[:, 0], expected[:, 0], atol=1e-5)  # ENTAILMENT is output 0
        assert np.allclose(got[:, 1], expected[:, 2], atol=1e-5)  # CONTRADICTION is output 2
    assert model.indices == (0, 2) and model.device == "cpu" and model.backend == backend


def test_the_backend_is_onnx_when_the_folder_has_an_onnx_file(nli, tmp_path):
    assert GroundingModel(nli).backend == "onnx"
    plain = shutil.copytree(nli, tmp_path / "plain", ignore=shutil.ignore_patterns("*.onnx"))
    assert GroundingModel(plain).backend == "transformers"
    with pytest.raises(ValueError, match="backend='onnx' needs a folder holding model.onnx"):
        GroundingModel(plain, backend="onnx")


def test_labels_are_read_from_the_config_in_any_order_and_named_when_they_say_nothing(tmp_path):
    flipped = build(tmp_path / "flipped", {0: "contradiction", 1: "neutral", 2: "entailment"}, bias=[3.0, 0.0, -1.0])
    p = GroundingModel(flipped, device="cpu").predict(PAIRS[:2])
    probs = np.exp([3.0, 0.0, -1.0]) / np.exp([3.0, 0.0, -1.0]).sum()
    assert np.allclose(p, [[probs[2], probs[0]]] * 2, atol=1e-6)
    two = build(tmp_path / "two", {0: "not_entailment", 1: "entailment"}, bias=[0.0, 1.0])
    p = GroundingModel(two, device="cpu").predict(PAIRS[:1])
    assert np.allclose(p, [[1 / (1 + np.exp(-1.0)), 0.0]], atol=1e-6)  # no contradiction label: 0
    one = build(tmp_path / "one", {0: "LABEL_0"}, bias=[0.5])
    assert np.allclose(GroundingModel(one, device="cpu").predict(PAIRS[:1]), [[1 / (1 + np.exp(-0.5)), 0.0]])
    vague = build(tmp_path / "vague", {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})
    with pytest.raises(ValueError, match="cannot tell which output means entailment .* pass labels="):
        GroundingModel(vague, device="cpu").predict(PAIRS[:1])
    assert GroundingModel(vague, device="cpu", labels={"entailment": 2, "contradiction": 0}).indices == (2, 0)


def test_label_indices_by_hand():
    assert label_indices({0: "entailment", 1: "neutral", 2: "contradiction"}, 3) == (0, 2)
    assert label_indices({"0": "SUPPORTED", "1": "UNSUPPORTED"}, 2) == (0, None)
    assert label_indices({0: "hallucinated", 1: "consistent"}, 2) == (1, None)
    assert label_indices({}, 1) == (None, None)
    with pytest.raises(ValueError, match="out of range"):
        label_indices({0: "a", 1: "b"}, 2, {"entailment": 5})


def test_device_choice():
    assert choose_device("auto", cuda_available=False) == "cpu"
    assert choose_device("auto", cuda_available=True) == "cuda"
    assert choose_device("cpu", cuda_available=True) == "cpu"
    assert choose_device("cuda:1", cuda_available=True) == "cuda:1"
    with pytest.raises(ValueError, match="no CUDA device is available"):
        choose_device("cuda", cuda_available=False)
    with pytest.raises(ValueError, match="device must be"):
        choose_device("gpu", cuda_available=True)


@pytest.mark.skipif(torch is not None and torch.cuda.is_available(), reason="checks the CPU-only machine's answer")
def test_cuda_asked_on_a_machine_without_it_fails_when_the_model_loads(nli):
    model = GroundingModel(nli, backend="transformers", device="cuda")
    with pytest.raises(ValueError, match="device='cuda' but no CUDA device"):
        model.predict(PAIRS[:1])
    assert GroundingModel(nli, backend="transformers", device="auto").device == "cpu"


def test_nothing_is_fetched_a_hub_name_resolves_from_the_local_cache_only(nli, tmp_path, monkeypatch):
    # Lay the folder out as the Hugging Face cache does (models--ORG--NAME/snapshots/REV + refs/main).
    cache = tmp_path / "hub"
    snap = cache / "models--acme--tiny-nli" / "snapshots" / ("0" * 40)
    shutil.copytree(nli, snap, ignore=shutil.ignore_patterns("*.onnx"))
    (cache / "models--acme--tiny-nli" / "refs").mkdir()
    (cache / "models--acme--tiny-nli" / "refs" / "main").write_text("0" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    got = GroundingModel("acme/tiny-nli", device="cpu").predict(PAIRS)
    assert np.allclose(got[:, 0], reference(nli, PAIRS)[:, 0], atol=1e-5)
    with pytest.raises(Exception) as err:  # not in the cache and offline: an error, not a download
        GroundingModel("acme/not-there", device="cpu").predict(PAIRS[:1])
    assert "offline" in str(err.value).lower() or "local" in str(err.value).lower() or "find" in str(err.value).lower()


def test_a_missing_tokenizer_file_is_named(nli, tmp_path):
    broken = shutil.copytree(nli, tmp_path / "broken")
    (broken / "tokenizer.json").unlink()
    with pytest.raises(ValueError, match="tokenizer.json is missing"):
        GroundingModel(broken, backend="onnx").predict(PAIRS[:1])


def test_default_weighting_by_hand():
    assert default_weighting(0.8, 0.9, 0.05) == 0.85
    assert default_weighting(1.0, 0.1, 0.8) == round(0.55 * 0.2, 4)
    assert default_weighting(1.0, 0.6, 0.4) == 0.8  # no confident contradiction: no penalty


def test_the_offline_judge_reads_the_models_probabilities_as_signals(nli):
    judge = OfflineJudge(embeddings=False, grounding=GroundingModel(nli, device="cpu", backend="onnx"))
    assert judge.name == "offline-lexical+grounding:tiny-nli" and "default weighting" in judge.note
    inputs = {
        "claims": ["The museum opens at 9 am.", "The sky is green."],
        "chunks": ["The museum opens at 9 am. The sky is blue."],
    }
    raw = asyncio.run(judge.signals("verify_claims", inputs))
    probs = judge.grounding.predict([(v["passage"], c) for v, c in zip(raw["verdicts"], inputs["claims"])])
    out = asyncio.run(judge.run("verify_claims", inputs)).output["verdicts"]
    base = judge.combinations.claim_support
    for v, r, (ent, _con) in zip(out, raw["verdicts"], probs):
        assert r["features"]["entailment"] == pytest.approx(ent, abs=1e-4)
        assert v["support"] == default_weighting(
            base.score(r["features"]), r["features"]["entailment"], r["features"]["contradiction"]
        )


def test_a_confident_contradiction_lowers_support_and_turns_the_verdict(tmp_path):
    sure = build(tmp_path / "contradicts", NLI, bias=[-4.0, -4.0, 4.0])  # every pair: contradiction
    judge = OfflineJudge(embeddings=False, grounding=sure, device="cpu")
    sample = Sample(question="When?", contexts=["The museum opens at 9 am."], answer="The museum opens at 9 am.")
    without = evaluate([sample], metrics=["faithfulness"], judge=OfflineJudge(embeddings=False), progress=False)
    with_model = evaluate([sample], metrics=["faithfulness"], judge=judge, progress=False)
    assert without[0].scores["faithfulness"].value == 1.0
    score = with_model[0].scores["faithfulness"]
    assert score.value < 0.01 and score.judge == "offline-lexical+grounding:contradicts"
    claim = score.details["claims"][0]
    assert claim["verdict"] == "contradicted" and "finds the passage contradicts the claim" in claim["reason"]


def test_fitted_grounding_coefficients_enter_the_combination(nli, tmp_path):
    from ragmeter.judges.offline.model import QUANTITIES, load_combinations

    shipped = load_combinations("lexical")
    data = {"lexical": {q: shipped.get(q).to_dict() for q in QUANTITIES}}
    data["lexical"]["claim_support"]["weights"] = {"overlap": 1.0, "entailment": 4.0, "contradiction": -2.0}
    (tmp_path / "fit.json").write_text(json.dumps(data))
    judge = OfflineJudge(embeddings=False, grounding=nli, device="cpu", combinations=tmp_path / "fit.json")
    assert "fitted coefficients" in judge.note
    inputs = {"claims": ["The sky is green."], "chunks": ["The sky is blue."]}
    raw = asyncio.run(judge.signals("verify_claims", inputs))["verdicts"][0]
    v = asyncio.run(judge.run("verify_claims", inputs)).output["verdicts"][0]
    assert v["support"] == judge.combinations.claim_support.score(raw["features"])


def test_local_embedder_device():
    assert LocalEmbedder().device == "cpu"
    with pytest.raises(ValueError, match="numpy MiniLM runs on the CPU only"):
        LocalEmbedder(device="cuda")
    with pytest.raises(ValueError, match="device must be"):
        LocalEmbedder(device="tpu")
