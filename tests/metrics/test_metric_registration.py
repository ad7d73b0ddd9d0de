"""Adding a metric is its class plus one line in ``ragmeter.metrics.REGISTRY``, everywhere: a metric
defined here (its facts set on the class) and registered with one line shows up, right, in
``evaluate``, the CLI, the diagnosis, the monitor, the labeling criteria, the profiles, the
dashboard's drill-down and the LlamaIndex evaluators. The registry is restored afterwards."""

from __future__ import annotations

import json
import re

import pytest

import ragmeter as rm
from ragmeter.data import Sample, Score
from ragmeter.metrics import REGISTRY, Metric
from ragmeter.metrics.base import LabelingCriterion
from ragmeter.metrics.requests import ScoringContext

_WORD = re.compile(r"[a-z]+")


class Groundedness(Metric):
    """``groundedness``: the share of the answer's sentences found in one chunk.

    A sentence is *found* when at least half of its words (lower-cased runs of letters) occur in
    one chunk. Value = found sentences / sentences. Example: "The tower is in Paris. It was painted
    blue." against the chunk "The tower stands in Paris.": the first sentence has 4 of its 5 words
    in the chunk (found), the second 0 of 4 (not found): 1 / 2 = 0.5.
    """

    name = "groundedness"
    threshold = 0.8
    warn = 0.6
    requires = ("answer", "contexts")
    uses_judge = False
    needs_question = False
    diagnosis = "generation"
    diagnosis_rank = 5
    degradation_rule = "faithfulness_degradation"
    evidence = frozenset({"claims"})
    criterion = LabelingCriterion(
        "grounded",
        "Is every sentence of the answer found in the chunks?",
        {"1": "none is", "3": "about half are", "5": "every one is"},
    )
    profile_levels = {"legal": (0.95, 0.9)}

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        chunks = [set(_WORD.findall(t.lower())) for t in sample.context_texts]
        claims = []
        for sentence in (s.strip() for s in re.split(r"(?<=[.!?])\s+", sample.answer or "") if s.strip()):
            words = _WORD.findall(sentence.lower())
            hits = [i for i, chunk in enumerate(chunks) if sum(w in chunk for w in words) * 2 >= len(words)]
            claims.append(
                {
                    "text": sentence,
                    "verdict": "supported" if hits else "not_found",
                    "evidence": [{"chunk": i, "quote": sample.context_texts[i]} for i in hits[:1]],
                }
            )
        value = sum(c["verdict"] == "supported" for c in claims) / len(claims)
        return Score(self.name, value, explanation=f"{value:.2f} of the sentences found", details={"claims": claims})


SAMPLE = Sample(
    "Where is the tower?",
    ["The tower stands in Paris."],
    answer="The tower is in Paris. It was painted blue.",
    id="tower",
)


@pytest.fixture
def registered():
    """``groundedness`` registered with one line, and the registry as it was afterwards."""
    REGISTRY["groundedness"] = (__name__, "Groundedness")
    try:
        yield
    finally:
        del REGISTRY["groundedness"]


def test_evaluate_and_the_cli_score_it(registered, tmp_path, capsys):
    from ragmeter.cli import main

    result = rm.evaluate([SAMPLE], metrics=["groundedness"], progress=False)
    score = result[0].scores["groundedness"]
    assert (score.value, score.label, score.judge) == (0.5, "fail", "code")  # 1 / 2, below warn 0.6
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps(SAMPLE.to_dict()) + "\n")
    assert main(["evaluate", str(data), "--metrics", "groundedness"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^groundedness\s+0\.5000\s", out, re.M), out
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    assert "groundedness" in " ".join(capsys.readouterr().out.split())  # the --metrics help lists it


def test_the_diagnosis_reads_its_side_and_rank(registered):
    from ragmeter.verdicts import DIAGNOSIS_RULE, diagnose, diagnosis_signals

    assert diagnosis_signals()["generation"] == ("faithfulness", "answer_relevancy", "groundedness")
    assert "Generation failure: faithfulness or answer_relevancy or groundedness is low" in DIAGNOSIS_RULE
    assert "none of the five is low" in DIAGNOSIS_RULE
    scores = rm.evaluate([SAMPLE], metrics=["groundedness"], progress=False)[0].scores
    d = diagnose(scores)
    assert d.kind == "generation" and d.reasons[-1] == "groundedness 0.50 below its warn level 0.6 (low)"


def test_the_monitor_watches_its_floor_and_its_drop(registered):
    from ragmeter.metrics.scoring import SampleResult
    from ragmeter.monitor import DEFAULT_THRESHOLDS, Monitor

    assert DEFAULT_THRESHOLDS["groundedness"] == 0.6  # its warn level
    monitor = Monitor(
        window=40,
        min_samples=20,
        recent=10,
        meter_provider=False,
        no_retrieval_limit=None,
        error_rate_limit=None,
        psi_limit=None,
    )
    assert monitor.thresholds["groundedness"] == 0.6
    for i, v in enumerate([0.9] * 30 + [0.5] * 10):
        sample = Sample(f"q{i}", ["c"], answer="a", id=f"s{i}")
        monitor.observe(SampleResult(sample, {"groundedness": Score("groundedness", v)}))
    firing = {(a.rule, a.metric) for a in monitor.alerts if a.state == "firing"}
    # the recent mean 0.5 is below the floor 0.6 and 0.4 below the earlier mean 0.9 (max_drop 0.1)
    assert firing == {("score_floor", "groundedness"), ("faithfulness_degradation", "groundedness")}


def test_labels_rate_its_criterion(registered, tmp_path):
    from ragmeter.labels import CRITERIA, CRITERION_METRICS, export_tasks, import_labels, match_labels

    assert list(CRITERIA)[-2:] == ["grounded", "overall"] and CRITERION_METRICS["grounded"] == "groundedness"
    assert CRITERIA["grounded"]["question"] == "Is every sentence of the answer found in the chunks?"
    result = rm.evaluate([SAMPLE], metrics=["groundedness"], progress=False)
    tasks = export_tasks(result, tmp_path / "tasks.jsonl")
    assert "grounded" in json.loads(tasks.read_text().splitlines()[0])["criteria"]
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        json.dumps({"sample_id": "tower", "annotator": "ann", "criterion": "grounded", "value": 4}) + "\n"
    )
    read = import_labels(labels)
    assert read[0].value == 4  # a criterion of the labeling page: rated 1-5
    matched = match_labels(result, read)
    assert matched.scales["groundedness"] == "1-5" and matched.items["groundedness"]["tower"].human == 4


def test_the_profiles_read_its_levels(registered):
    from ragmeter.profiles import get_profile

    [legal] = [m for m in get_profile("legal").metrics(["groundedness"]) if m.name == "groundedness"]
    assert (legal.threshold, legal.warn) == (0.95, 0.9)
    [medical] = [m for m in get_profile("medical").metrics(["groundedness"]) if m.name == "groundedness"]
    assert (medical.threshold, medical.warn) == (0.8, 0.6)  # no medical levels: its own


def test_the_drill_down_shows_its_claims(registered):
    result = rm.evaluate([SAMPLE], metrics=["groundedness"], progress=False)
    html = result.to_html()
    assert "verdicts from groundedness" in html
    assert re.search(r'<li class="claim v-not_found">.*?It was painted blue\.', html, re.S)


def test_llamaindex_gets_its_evaluator_that_needs_no_query(registered):
    pytest.importorskip("llama_index.core")
    from ragmeter.integrations.llamaindex import evaluators

    cls = evaluators.EVALUATOR_CLASSES["groundedness"]
    assert cls.__name__ == "RagmeterGroundednessEvaluator" and "groundedness" in evaluators.QUERY_OPTIONAL
    out = cls().evaluate(response=SAMPLE.answer, contexts=SAMPLE.context_texts)  # no query
    assert (out.score, out.passing, out.invalid_result) == (0.5, False, False)


def test_the_registry_is_as_it_was():
    assert "groundedness" not in REGISTRY
