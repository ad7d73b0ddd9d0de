"""The dashboard page (ragmeter.dashboard) without a browser: the summary is in the raw HTML (no
JavaScript needed), all text is escaped, nothing is loaded from elsewhere, and each section
shows what the Scores' details hold (claims, citations, chunks, trends, response time)."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest

import ragmeter as rm
from ragmeter.judges import OfflineJudge
from ragmeter.dashboard import RunEntry, SampleEntry, Verdicts, render, render_result
from ragmeter.data import Score
from ragmeter.result import EvaluationResult, SampleResult

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "rag_samples.jsonl"
STATS = ("count", "mean", "median", "std", "min", "max", "errors", "n/a")

#: The offline judge on its lexical path: the same page, without loading the embedding model.
LEXICAL = OfflineJudge(embeddings=False)


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of each <script> element."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


@pytest.fixture(scope="module")
def result():
    return rm.evaluate(str(EXAMPLES), judge=LEXICAL, progress=False)


@pytest.fixture(scope="module")
def page(result):
    return render_result(result)


def summary_cells(page: str) -> dict[str, dict[str, str]]:
    table = re.search(r'<table id="summary-table">.*?</table>', page, re.S).group(0)
    out = {}
    for metric, row in re.findall(r'<tr data-metric="([^"]+)">(.*?)</tr>', table, re.S):
        out[metric] = dict(re.findall(r'<td data-stat="([^"]+)"[^>]*>([^<]*)</td>', row))
    return out


def test_summary_is_plain_html_with_the_result_numbers(result, page):
    cells = summary_cells(page)
    assert list(cells) == result.metrics
    for metric, row in result.summary().items():
        for stat in STATS:
            value = row[stat]
            assert cells[metric][stat] == (f"{value:.4f}" if isinstance(value, float) else str(value)), (metric, stat)
        bar = re.search(rf'<tr data-metric="{re.escape(metric)}">.*?<td class="bars">(.*?)</td>', page, re.S).group(1)
        assert f'{row["pass"]} pass' in bar and f'{row["fail"]} fail' in bar and "<svg" in bar
    # readable without JavaScript: the table comes before the only script, and the filter
    # controls (useless without it) are hidden until the script marks the page
    assert page.index('id="summary-table"') < page.index("<script")
    assert ".js .controls { display: flex; }" in page


def test_page_is_self_contained(page):
    parsed = Tags(page)
    assert len(parsed.scripts) == 1
    for tag, attrs in parsed.tags:
        assert tag not in ("link", "img", "iframe", "object", "embed"), tag
        assert "src" not in attrs, (tag, attrs)
        assert attrs.get("href", "#").startswith("#"), attrs
    assert "@import" not in page and "url(" not in page
    # the Content-Security-Policy forbids every fetch and allows exactly the page's own script
    csp = next(a["content"] for t, a in parsed.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    digest = base64.b64encode(hashlib.sha256(parsed.scripts[0].encode("utf-8")).digest()).decode("ascii")
    assert "default-src 'none'" in csp and f"script-src 'sha256-{digest}'" in csp


def test_the_nav_links_every_section_on_the_page_and_nothing_else(page):
    import re

    nav = re.search(r"<nav>(.*?)</nav>", page).group(1)
    targets = re.findall(r'href="#([a-z-]+)"', nav)
    assert targets == ["summary", "trends", "distributions", "samples"]  # no sweeps, conversations or labels here
    assert all(f'<section id="{t}"' in page for t in targets)


def test_every_text_is_escaped():
    evil = "<script>alert(1)</script>"
    records = [{"id": 'x"><b>bold</b>', "question": f"{evil} what?", "reference": "<svg onload=alert(5)>",
                "answer": "<img src=x onerror=alert(2)> Paris is in France [1].",
                "contexts": [{"id": '"><script>alert(3)</script>', "text": "</details><script>alert(4)</script> Paris is in France."}],
                "relevant_ids": ["a"], "metadata": {"tags": ["<i>t</i>", "it's \"quoted\""]}}]
    result = rm.evaluate(records, metrics=["faithfulness", "citation_accuracy", "context_relevance", "mrr"],
                         judge=LEXICAL, progress=False)
    result.invalid.append(rm.RecordError("line 9", "question", "<script>alert(6)</script>"))
    page = render_result(result, title=f"report {evil}")
    parsed = Tags(page)
    assert len(parsed.scripts) == 1 and "alert" not in parsed.scripts[0]
    assert "<script>alert" not in page and "<img" not in page and "<svg onload" not in page and "<i>t</i>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; what?" in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    assert not [(t, a) for t, a in parsed.tags for name in a if name.startswith("on")]
    assert {t for t, _ in parsed.tags} <= {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3",
                                          "h4", "p", "nav", "a", "main", "section", "table", "thead", "tbody", "tr",
                                          "th", "td", "span", "b", "svg", "rect", "title", "line", "text", "polyline",
                                          "circle", "figure", "figcaption", "div", "form", "label", "select", "option",
                                          "input", "button", "details", "summary", "ul", "ol", "li", "q", "code",
                                          "mark", "script"}
    # the row data for the script is JSON inside an escaped attribute: it parses back to the same text
    row = next(a["data-row"] for t, a in parsed.tags if t == "details")
    assert '"id": "x\\"><b>bold</b>"' in row and "<i>t</i>" in row


def _cited_result() -> EvaluationResult:
    sample = rm.Sample("What is the capital of France and how many people live there?",
                       [{"id": "d1", "text": "Paris is the capital of France."},
                        {"id": "d2", "text": "The Eiffel Tower is 330 metres tall."},
                        {"id": "d3", "text": "Paris has about 2.1 million inhabitants."}],
                       answer="Paris is the capital of France [1]. It has about 2.1 million inhabitants [2][3]. "
                              "It was founded by the Romans.", id="paris")
    return rm.evaluate([sample], metrics=["faithfulness", "citation_accuracy", "context_relevance",
                                          "context_precision"], judge=LEXICAL, progress=False)


def test_drilldown_colours_claims_and_citations_by_verdict():
    result = _cited_result()
    details = result[0].scores["citation_accuracy"].details
    page = render_result(result)
    drill = re.search(r'<div class="drill">.*</details>', page, re.S).group(0)
    claims = result[0].scores["faithfulness"].details["claims"]
    assert drill.count('<li class="claim v-') == len(claims)
    for c in claims:
        assert f'<li class="claim v-{c["verdict"]}">' in drill
    for citation in details["citations"]:
        assert f'<span class="cite v-{citation["verdict"]}"' in drill
    verdicts = {c["verdict"] for c in details["citations"]}
    assert "supports" in verdicts and "does_not_support" in verdicts  # [2] cites the Eiffel Tower chunk
    assert 'class="unit v-' in drill and "<q>Paris is the capital of France.</q>" in drill
    assert "<h4>Citations</h4>" in drill and drill.count('<li id="s0-c') == 3
    assert "relevance <b>" in drill and "useful" in drill
    assert 'class="verdict"' in drill and "Diagnosis:" in drill and "Rule: " in drill


def test_drilldown_without_evidence_and_with_malformed_details():
    sample = rm.Sample("q?", ["a chunk"], answer="An answer [1].", id="odd")
    scores = {"faithfulness": Score("faithfulness", 0.5, details={"claims": [{"claim": "x", "verdict": "supported",
                                                                               "evidence": [{"chunk": "nope"}]}]},
                                    label="fail"),
              "context_relevance": Score("context_relevance", 0.9, details={"chunks": "not a list"}, label="pass"),
              "context_recall": Score("context_recall", None, error="JudgeError: boom")}
    result = EvaluationResult([SampleResult(sample, scores)], list(scores))
    page = render_result(result)
    assert 'class="cite v-unscored"' in page  # [1] parsed, but no citation metric judged it
    assert "chunk nope" in page and "context_recall: error: JudgeError: boom" in page
    assert '<span class="v error" title="JudgeError: boom">err</span>' in page
    # composite over the two values; the error is listed, not counted as 0
    assert "<li>context_recall: error: JudgeError: boom</li>" in page


def test_trends_over_runs_and_days(result):
    later = rm.evaluate(str(EXAMPLES), judge=LEXICAL, progress=False, metrics=["faithfulness", "context_recall"])
    runs = [RunEntry.from_result(result, 1), RunEntry.from_result(later, 2, kind="inline", label="prod")]
    t0 = datetime(2025, 3, 1, 12, tzinfo=timezone.utc)
    samples = [SampleEntry(r, 2, t0 + timedelta(days=i % 3)) for i, r in enumerate(later)]
    page = render(runs, samples)
    trends = re.search(r'<section id="trends">.*?</section>', page, re.S).group(0)
    charts = re.findall(r'<svg class="chart trend"[^>]*data-metric="([^"]+)">(.*?)</svg>', trends, re.S)
    per_run = [(m, body.count("<circle")) for m, body in charts[:len(result.metrics)]]
    assert dict(per_run)["faithfulness"] == 2 and dict(per_run)["mrr"] == 1  # the second run has no mrr
    assert "Mean per day" in trends and "2025-03-01" in trends and "2025-03-03" in trends
    assert summary_cells(page)["faithfulness"]["mean"] == f'{later.summary()["faithfulness"]["mean"]:.4f}'
    # given day points (e.g. from Store.metric_trend(m, by="day")) replace the computed ones
    page = render(runs, samples, daily={"faithfulness": [("2025-01-01", 0.5, 3, 0), ("2025-01-02", None, 0, 2)]})
    trends = re.search(r'<section id="trends">.*?</section>', page, re.S).group(0)
    assert "2025-01-01: mean 0.5000 (3 values)" in trends and "2025-03-01" not in trends


def test_one_run_says_trends_need_more():
    sample = rm.Sample("q?", [{"id": "a", "text": "t"}], relevant_ids=["a"])
    page = render_result(rm.evaluate([sample], metrics=["mrr"], progress=False))
    assert "the per-run trend lines start with the second run" in page and 'class="chart trend"' not in page


def test_response_time_from_captured_latency():
    samples = [rm.Sample(f"q{i}?", [{"id": "a", "text": "t"}], relevant_ids=["a"], id=f"s{i}",
                         metadata={"latency": {"retrieval_s": 0.1, "total_s": t}}) for i, t in enumerate((1.0, 4.0, 8.0))]
    result = rm.evaluate(samples, metrics=["mrr"], progress=False)
    run = RunEntry.from_result(result)
    assert run.summary["response_time"]["count"] == 3 and run.summary["response_time"]["fail"] == 1
    assert run.thresholds["response_time"] == (1.0, 0.5)
    # evaluate() scores it too, next to the judged metrics: 1 s pass (1.0), 4 s warn (0.75), 8 s fail (0.2)
    assert result.summary()["response_time"]["count"] == 3 and result.summary()["response_time"]["fail"] == 1
    assert result.summary()["response_time"]["mean"] == pytest.approx((1.0 + 0.75 + 0.2) / 3)
    page = render_result(result)
    assert summary_cells(page)["response_time"]["mean"] == f"{(1.0 + 0.75 + 0.2) / 3:.4f}"
    assert 'data-sort="m:response_time"' in page and "retrieval_s 0.10 s, total_s 8.00 s" in page
    strict = render_result(result, verdicts=Verdicts(pass_under=0.5, warn_under=2.0))
    assert "response time 1.00 s: over 0.5 s, at most 2 s (warn)" in strict


def test_composite_settings_show_on_the_page():
    result = _cited_result()
    page = render_result(result, verdicts=Verdicts(method="weighted", weights={"faithfulness": 2, "context_relevance": 1}))
    assert "(weighted mean, weights faithfulness 2, context_relevance 1)" in page


def test_invalid_records_and_run_facts(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"question": "q?", "contexts": [{"id": "a", "text": "t"}], "relevant_ids": ["a"]}\n{"contexts": []}\n')
    result = rm.evaluate(str(path), metrics=["mrr"], progress=False)
    page = render_result(result)
    assert '<section id="invalid"><h2>Invalid records (1)</h2>' in page and "line 2: field &#x27;question&#x27;" in page
    assert "judge calls 0" in page and "1 invalid records" in page


def test_render_needs_a_run():
    with pytest.raises(ValueError, match="at least one run"):
        render([], [])


def test_stored_runs_and_samples_render(tmp_path, result):
    pytest.importorskip("sqlalchemy")
    from ragmeter.store import Store

    with Store(tmp_path / "runs.db") as store:
        first = store.record_run(result, dataset="examples", tags=["nightly"])
        second = store.record_run(result, dataset="examples")
        runs = [RunEntry.from_result(store.run(info.id), info.id, created_at=info.created_at, kind=info.kind,
                                     dataset=info.dataset, app_version=info.app_version, git_commit=info.git_commit)
                for info in reversed(store.runs())]
        page = render(runs, store.samples(run_id=first, limit=None))  # StoredSample as it is
    assert [r.id for r in runs] == [str(first), str(second)]
    assert summary_cells(page)["faithfulness"]["mean"] == f'{result.summary()["faithfulness"]["mean"]:.4f}'
    assert page.count('<details class="sample"') == len(result) and '<span class="tag">nightly</span>' in page
