"""The dashboard page (ragmeter.dashboard) without a browser: the summary is in the raw HTML (no
JavaScript needed), all text is escaped, nothing is loaded from elsewhere, and each section
shows what the Scores' details hold (claims, citations, chunks, trends, response time)."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

import pytest

import ragmeter as rm
from helpers import ROOT
from ragmeter.dashboard import RunEntry, SampleEntry, Verdicts, render, render_result
from ragmeter.data import Score
from ragmeter.judges import OfflineJudge
from ragmeter.metrics.scoring import SampleResult
from ragmeter.result import EvaluationResult

EXAMPLES = ROOT / "examples" / "rag_samples.jsonl"
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
    records = [
        {
            "id": 'x"><b>bold</b>',
            "question": f"{evil} what?",
            "reference": "<svg onload=alert(5)>",
            "answer": "<img src=x onerror=alert(2)> Paris is in France [1].",
            "contexts": [
                {"id": '"><script>alert(3)</script>', "text": "</details><script>alert(4)</script> Paris is in France."}
            ],
            "relevant_ids": ["a"],
            "metadata": {"tags": ["<i>t</i>", "it's \"quoted\""]},
        }
    ]
    result = rm.evaluate(
        records,
        metrics=["faithfulness", "citation_accuracy", "context_relevance", "mrr"],
        judge=LEXICAL,
        progress=False,
    )
    result.invalid.append(rm.RecordError("line 9", "question", "<script>alert(6)</script>"))
    page = render_result(result, title=f"report {evil}")
    parsed = Tags(page)
    assert len(parsed.scripts) == 1 and "alert" not in parsed.scripts[0]
    assert "<script>alert" not in page and "<img" not in page and "<svg onload" not in page and "<i>t</i>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; what?" in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    assert not [(t, a) for t, a in parsed.tags for name in a if name.startswith("on")]
    assert {t for t, _ in parsed.tags} <= {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "header",
        "h1",
        "h2",
        "h3",
        "h4",
        "p",
        "nav",
        "a",
        "main",
        "section",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "span",
        "b",
        "svg",
        "rect",
        "line",
        "text",
        "polyline",
        "circle",
        "figure",
        "figcaption",
        "div",
        "form",
        "label",
        "select",
        "option",
        "input",
        "button",
        "details",
        "summary",
        "ul",
        "ol",
        "li",
        "q",
        "code",
        "mark",
        "script",
    }
    # the row data for the script is JSON inside an escaped attribute: it parses back to the same text
    row = next(a["data-row"] for t, a in parsed.tags if t == "details")
    assert '"id": "x\\"><b>bold</b>"' in row and "<i>t</i>" in row


def _cited_result() -> EvaluationResult:
    sample = rm.Sample(
        "What is the capital of France and how many people live there?",
        [
            {"id": "d1", "text": "Paris is the capital of France."},
            {"id": "d2", "text": "The Eiffel Tower is 330 metres tall."},
            {"id": "d3", "text": "Paris has about 2.1 million inhabitants."},
        ],
        answer="Paris is the capital of France [1]. It has about 2.1 million inhabitants [2][3]. "
        "It was founded by the Romans.",
        id="paris",
    )
    return rm.evaluate(
        [sample],
        metrics=["faithfulness", "citation_accuracy", "context_relevance", "context_precision"],
        judge=LEXICAL,
        progress=False,
    )


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
    scores = {
        "faithfulness": Score(
            "faithfulness",
            0.5,
            details={"claims": [{"claim": "x", "verdict": "supported", "evidence": [{"chunk": "nope"}]}]},
            label="fail",
        ),
        "context_relevance": Score("context_relevance", 0.9, details={"chunks": "not a list"}, label="pass"),
        "context_recall": Score("context_recall", None, error="JudgeError: boom"),
    }
    result = EvaluationResult([SampleResult(sample, scores)], list(scores))
    page = render_result(result)
    assert 'class="cite v-unscored"' in page  # [1] parsed, but no citation metric judged it
    assert "chunk nope" in page and "context_recall: error: JudgeError: boom" in page
    assert '<span class="v error" title="JudgeError: boom">err</span>' in page
    # composite over the two values; the error is listed, not counted as 0
    assert "<li>context_recall: error: JudgeError: boom</li>" in page


def test_trends_over_runs_and_days(result):
    later = rm.evaluate(str(EXAMPLES), judge=LEXICAL, progress=False, metrics=["faithfulness", "context_recall"])
    runs = [
        RunEntry.from_result(result, 1, dataset="rag"),
        RunEntry.from_result(later, 2, kind="inline", label="prod", dataset="rag"),
    ]
    t0 = datetime(2025, 3, 1, 12, tzinfo=UTC)
    samples = [SampleEntry(r, 2, t0 + timedelta(days=i % 3)) for i, r in enumerate(later)]
    page = render(runs, samples)
    trends = re.search(r'<section id="trends">.*?</section>', page, re.S).group(0)
    charts = re.findall(r'<svg class="chart trend"[^>]*data-metric="([^"]+)">(.*?)</svg>', trends, re.S)
    per_run = [(m, body.count("<circle")) for m, body in charts[: len(result.metrics)]]
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
    samples = [
        rm.Sample(
            f"q{i}?",
            [{"id": "a", "text": "t"}],
            relevant_ids=["a"],
            id=f"s{i}",
            metadata={"latency": {"retrieval_s": 0.1, "total_s": t}},
        )
        for i, t in enumerate((1.0, 4.0, 8.0))
    ]
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
    page = render_result(
        result, verdicts=Verdicts(method="weighted", weights={"faithfulness": 2, "context_relevance": 1})
    )
    assert "(weighted mean, weights faithfulness 2, context_relevance 1)" in page


def test_invalid_records_and_run_facts(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text(
        '{"question": "q?", "contexts": [{"id": "a", "text": "t"}], "relevant_ids": ["a"]}\n{"contexts": []}\n'
    )
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
        runs = [
            RunEntry.from_result(
                store.run(info.id),
                info.id,
                created_at=info.created_at,
                kind=info.kind,
                dataset=info.dataset,
                app_version=info.app_version,
                git_commit=info.git_commit,
            )
            for info in reversed(store.runs())
        ]
        page = render(runs, store.samples(run_id=first, limit=None))  # StoredSample as it is
    assert [r.id for r in runs] == [str(first), str(second)]
    assert summary_cells(page)["faithfulness"]["mean"] == f'{result.summary()["faithfulness"]["mean"]:.4f}'
    assert page.count('<details class="sample"') == len(result) and '<span class="tag">nightly</span>' in page


# --------------------------------------------------------------------------- issue 38: datasets, filters, latency, composite


def _timed(values: list[float], latencies: list[float | None], ids: str = "abcd") -> EvaluationResult:
    """A run of one metric whose samples carry the given response times (None: not captured)."""
    rows = []
    for sid, v, t in zip(ids, values, latencies):
        meta = {"latency": {"total_s": t}} if t is not None else {}
        rows.append(
            SampleResult(
                rm.Sample(f"{sid}?", ["c"], id=sid, metadata=meta),
                {"faithfulness": Score("faithfulness", v, label="pass" if v >= 0.85 else "fail")},
            )
        )
    return EvaluationResult(rows, ["faithfulness"], judge="offline")


def _trend_groups(page: str) -> dict[str, list[tuple[str, int]]]:
    """Per trend group (data-series): each chart's metric and number of points."""
    trends = re.search(r'<section id="trends">.*?</section>', page, re.S).group(0)
    out = {}
    for series, body in re.findall(
        r'<div class="trend-group" data-series="([^"]*)"[^>]*>(.*?)</div></div>', trends, re.S
    ):
        charts = re.findall(r'<svg class="chart trend"[^>]*data-metric="([^"]+)">(.*?)</svg>', body, re.S)
        out[series] = [(m, b.count("<circle")) for m, b in charts]
    return out


def test_runs_of_two_datasets_draw_one_group_of_trends_each():
    """Runs of two datasets recorded in turn drew one interleaved line per metric (issue 38)."""
    a1, b1, a2, b2 = (_timed([v, v], [None, None], "ab") for v in (0.9, 0.2, 0.8, 0.3))
    runs = [
        RunEntry.from_result(r, i, dataset=d)
        for i, (r, d) in enumerate([(a1, "faq"), (b1, "legal"), (a2, "faq"), (b2, "legal")], 1)
    ]
    page = render(runs, SampleEntry.from_result(b2, "4"))
    groups = _trend_groups(page)
    assert groups == {"faq": [("faithfulness", 2)], "legal": [("faithfulness", 2)]}  # never 4 points on one line
    trends = re.search(r'<section id="trends">.*?</section>', page, re.S).group(0)
    faq = trends[trends.index('data-series="faq"') : trends.index('data-series="legal"')]
    assert "run 1: mean 0.9000" in faq and "run 3: mean 0.8000" in faq and "run 2:" not in faq
    assert 'data-runs="[&quot;1&quot;, &quot;3&quot;]"' in faq
    # the runs table lists every run with its dataset, newest first, and the page's filters offer both
    table = page[page.index('<table id="runs-table">') : page.index("</table>", page.index('<table id="runs-table">'))]
    assert re.findall(r'data-run="(\d+)" data-series="(\w+)"', table) == [
        ("4", "legal"),
        ("3", "faq"),
        ("2", "legal"),
        ("1", "faq"),
    ]
    assert '<select id="r-dataset"><option value="">any dataset</option><option value="faq">faq</option>' in page
    # one dataset: one group, as before
    assert list(_trend_groups(render(runs[::2], []))) == [""]


def test_latency_in_seconds_in_the_summary_trends_and_report():
    """Response time showed only as a 0-1 score; now p50 / p95 seconds (issue 38). Percentiles by
    linear interpolation: 1, 2, 3, 4 s -> p50 2.5 s, p95 3 + 0.85 * 1 = 3.85 s."""
    from ragmeter.report import latency_line, markdown_report
    from ragmeter.verdicts import latency_summary

    assert latency_summary([4.0, None, 1.0, 3.0, 2.0]) == {"count": 4, "p50_s": 2.5, "p95_s": 3.85, "max_s": 4.0}
    assert latency_summary([None]) is None and latency_summary([7.0]) == {
        "count": 1,
        "p50_s": 7.0,
        "p95_s": 7.0,
        "max_s": 7.0,
    }
    first = _timed([0.9, 0.9, 0.9, 0.9], [1.0, 2.0, 3.0, 4.0])
    second = _timed([0.9, 0.9, 0.9, 0.9], [2.0, 2.0, 10.0, None])  # p50 2.0, p95: h = 1.9 -> 2 + 0.9 * 8 = 9.2
    runs = [RunEntry.from_result(first, 1), RunEntry.from_result(second, 2)]
    assert runs[0].latency == {"count": 4, "p50_s": 2.5, "p95_s": 3.85, "max_s": 4.0}
    assert runs[1].latency == {"count": 3, "p50_s": 2.0, "p95_s": 9.2, "max_s": 10.0}
    page = render(runs, SampleEntry.from_result(second, "2"))
    summary = page[page.index('<section id="summary">') : page.index("</section>")]
    assert '(seconds, 3 samples with a captured latency)' in summary
    assert '<b data-latency="p50">2.00</b> s' in summary and '<b data-latency="p95">9.20</b> s' in summary
    assert "response time p50 2.00 s · p95 9.20 s" in page  # the header
    [(_, charts)] = _trend_groups(page).items()
    assert ("response_time_p50_s", 2) in charts and ("response_time_p95_s", 2) in charts
    assert "run 2: p95 9.20 s (3 values)" in page and ">10s</text>" in page  # the axis is in seconds, up to 10
    assert latency_line(second) == "response time: p50 2.00 s, p95 9.20 s, max 10.00 s (3 samples)"
    assert "- response time: p50 2.00 s, p95 9.20 s, max 10.00 s (3 samples)" in markdown_report(second)
    assert latency_line(_timed([0.9], [None])) is None


def test_evaluate_prints_the_response_time_in_seconds(tmp_path, capsys):
    import json

    from ragmeter.cli import main

    path = tmp_path / "timed.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "question": f"q{i}?",
                    "contexts": [{"id": "a", "text": "t"}],
                    "relevant_ids": ["a"],
                    "metadata": {"latency": {"total_s": t}},
                }
            )
            + "\n"
            for i, t in enumerate((1.0, 2.0, 3.0, 4.0))
        )
    )
    assert main(["evaluate", str(path), "-m", "mrr", "--no-progress"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[out.index(next(line for line in out if line.startswith("response_time"))) + 1] == (
        "response time: p50 2.50 s, p95 3.85 s, max 4.00 s (4 samples)"
    )  # right after the table


def test_the_weakest_metric_stands_beside_every_grade():
    s = {
        "faithfulness": Score("faithfulness", 0.9, label="pass"),
        "context_recall": Score("context_recall", 0.0, label="fail"),
        "answer_relevancy": Score("answer_relevancy", 0.6, label="warn"),
        "mrr": Score("mrr", 0.0),
    }
    result = EvaluationResult([SampleResult(rm.Sample("q?", ["c"], id="s1"), s)], list(s), judge="offline")
    page = render_result(result)
    row = page[page.index('<details class="sample"') : page.index("</summary>", page.index('<details class="sample"'))]
    assert (
        '<span class="weakest" title="the weakest metric of the composite: context_recall 0.0000">context recall '
        '0.00</span>' in row
    )  # mrr (a retrieval metric) is no part of the composite
    assert 'Weakest: <b class="weakest">context_recall 0.00</b>' in page


@pytest.mark.parametrize(
    "method, expected",
    [
        # faithfulness 0.9, answer_relevancy 0.6, context_recall 0.4
        ("harmonic", 3 / (1 / 0.9 + 1 / 0.6 + 1 / 0.4)),
        ("weighted", (0.9 + 0.6 + 0.4) / 3),
        ("geometric", (0.9 * 0.6 * 0.4) ** (1 / 3)),
        ("min", 0.4),
    ],
)
def test_composite_forms(method, expected):
    from ragmeter.verdicts import composite_score

    s = {
        "faithfulness": Score("faithfulness", 0.9),
        "answer_relevancy": Score("answer_relevancy", 0.6),
        "context_recall": Score("context_recall", 0.4),
    }
    assert composite_score(s, method=method) == pytest.approx(expected)
    s["context_recall"] = Score("context_recall", 0.0)
    assert composite_score(s, method=method) == pytest.approx(
        {"harmonic": 0.0, "geometric": 0.0, "min": 0.0, "weighted": 0.5}[method]
    )
    with pytest.raises(ValueError, match="method must be one of"):
        composite_score(s, method="median")


def test_dashboard_filters_by_dataset_kind_and_tag(tmp_path, capsys):
    """``ragmeter dashboard`` had no --dataset / --kind / --tag (the Store API had): the page draws
    only the runs that match (issue 38)."""
    pytest.importorskip("sqlalchemy")
    from ragmeter.cli import main
    from ragmeter.dashboard import render_store
    from ragmeter.store import Store

    db = tmp_path / "h.db"
    with Store(db) as store:
        faq1 = store.record_run(_timed([0.9, 0.8], [1.0, 2.0], "ab"), dataset="faq", tags=["nightly"])
        legal = store.record_run(_timed([0.2, 0.3], [5.0, 6.0], "ab"), dataset="legal")
        faq2 = store.record_run(_timed([0.7, 0.6], [1.0, 3.0], "ab"), dataset="faq")
        store.record_samples(_timed([0.5], [0.5], "z").results, source="langchain")
        assert [i.id for i in store.runs(tag="nightly")] == [faq1]  # the Store's tag filter
        everything = render_store(store)
        only_faq = render_store(store, dataset="faq")
        nightly = render_store(store, tag="nightly")
        inline = render_store(store, kind="inline")
        with pytest.raises(ValueError, match="no run matches dataset 'nope'"):
            render_store(store, dataset="nope")

    def listed(page):  # the run ids of the runs table, or of the one run on the page
        return re.findall(r'<tr data-run="(\d+)"', page) or re.findall(r"latest: run (\d+)", page)

    assert listed(everything) == ["4", str(faq2), str(legal), str(faq1)]
    assert set(_trend_groups(everything)) == {"faq", "legal", "inline runs without a dataset"}
    assert listed(only_faq) == [str(faq2), str(faq1)] and list(_trend_groups(only_faq)) == [""]
    assert listed(nightly) == [str(faq1)] and listed(inline) == ["4"]
    assert "Summary <span class=\"muted\">(run 3, 2 samples)" in only_faq  # the newest run of the dataset
    assert main(["dashboard", "--db", str(db), "-o", str(tmp_path / "d.html"), "--dataset", "legal"]) == 0
    page = (tmp_path / "d.html").read_text(encoding="utf-8")
    assert listed(page) == [str(legal)] and '<b data-latency="p95">5.95</b> s' in page  # 5 + 0.95 * 1
    assert main(["dashboard", "--db", str(db), "--kind", "evaluate", "--tag", "none-such"]) == 2
    assert "no run matches kind 'evaluate', tag 'none-such'" in capsys.readouterr().err


def test_a_store_of_sweeps_only_shows_no_setting_as_a_run(tmp_path):
    """A store holding only sweeps showed its settings as runs (summary, trends); now the page is
    its sweeps, with each setting's response time in seconds (issue 38)."""
    pytest.importorskip("sqlalchemy")
    from ragmeter.dashboard import render_store
    from ragmeter.store import Store

    def build(top_k):
        return lambda question: (None, [{"id": "a", "text": "alpha"}, {"id": "b", "text": "beta"}][:top_k])

    with Store(tmp_path / "s.db") as store:
        table = rm.sweep(
            build,
            {"top_k": [1, 2]},
            [rm.Sample("alpha?", relevant_ids=["b"])],
            metrics=["mrr"],
            progress=False,
            store=store,
        )
        page = render_store(store)
        assert render_store(store, kind="sweep").count('<section id="sweeps">') == 1
        with pytest.raises(ValueError, match="no run matches kind 'evaluate'"):
            render_store(store, kind="evaluate")
    assert 'id="summary"' not in page and 'id="trends"' not in page and 'id="samples"' not in page
    assert "1 sweep (2 settings) · no evaluation run" in page and '<section id="sweeps">' in page
    head = page[
        page.index('<table class="sweep-table">') : page.index("</thead>", page.index('<table class="sweep-table">'))
    ]
    assert "<th>p50 s</th><th>p95 s</th>" in head and page.count('data-latency="p50"') == 2
    assert [set(r) >= {"p50_s", "p95_s"} and r["p50_s"] >= 0 for r in table.rows] == [True, True]
    assert "| top_k | mrr | response_time | p50_s | p95_s | samples |" in table.to_markdown()
