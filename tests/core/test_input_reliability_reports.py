"""What ragmeter writes stays readable and clean (issue 13, items 3, 5 and 10): strict JSON in every
report and export (no bare NaN / Infinity), atomic report writes, a report that cannot be written
does not lose the others, and secrets in Score errors / explanations reach no output."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import pytest

import ragmeter as rm
from helpers.tracing import memory_provider
from ragmeter.cli import main
from ragmeter.data import Sample, Score
from ragmeter.metrics.base import Metric
from ragmeter.metrics.scoring import SampleResult
from ragmeter.readers import load_samples, save_samples
from ragmeter.result import EvaluationResult
from ragmeter.tracing import OTLPJsonFileExporter, read_otlp_json

KEY = "sk-proj-AbCdEfGhIjKlMnOpQrSt1234"
BEARER = "Bearer eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.sig"
REPORTS = ("md", "html", "json", "jsonl", "csv")


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"bare {name} in JSON")

    return json.loads(text, parse_constant=refuse)


class OddValues(Metric):
    """Deterministic: a value, with NaN and infinities in its details."""

    name = "odd"
    uses_judge = False
    requires = ("contexts",)

    async def compute(self, sample, ctx):
        return Score(
            self.name,
            0.5,
            explanation="ok",
            details={"nan": math.nan, "inf": math.inf, "neg": [-math.inf], "pair": (1, math.nan)},
        )


class Leaky(Metric):
    """Fails like a gateway that echoes the request headers."""

    name = "leaky"
    uses_judge = False
    requires = ("contexts",)

    async def compute(self, sample, ctx):
        if sample.question == "explain":
            return Score(self.name, None, explanation=f"judge said: key {KEY} rejected")
        raise RuntimeError(
            f'401 from gateway: {{"Authorization": "{BEARER}", "key": "{KEY}"}} via https://svc:hunter22@proxy.local/v1'
        )


def _samples():
    return [
        Sample("q1", ["c1"], answer="a", metadata={"nan": math.nan, "inf": -math.inf}),
        Sample("q2", [{"text": "c2", "score": 0.7}], answer="b"),
    ]


def test_every_report_of_a_run_with_odd_values_is_strict_json(tmp_path):
    result = rm.evaluate(_samples(), [OddValues()], progress=False)
    for ext in REPORTS:
        result.save(tmp_path / f"r.{ext}")
    data = _strict((tmp_path / "r.json").read_text(encoding="utf-8"))
    details = data["samples"][0]["scores"]["odd"]["details"]
    assert (
        details["nan"] is None and details["inf"] is None and details["neg"] == [None] and details["pair"] == [1, None]
    )
    assert data["samples"][0]["sample"]["metadata"] == {"nan": None, "inf": None}
    for line in (tmp_path / "r.jsonl").read_text(encoding="utf-8").split("\n")[:-1]:
        _strict(line)
    _strict(result.to_json())
    back = EvaluationResult.from_jsonl(tmp_path / "r.jsonl")
    assert back.values("odd") == [0.5, 0.5]


def test_saved_samples_and_trace_exports_are_strict_json(tmp_path):
    for suffix in (".jsonl", ".csv"):
        path = save_samples(_samples(), tmp_path / f"s{suffix}")
        text = path.read_text(encoding="utf-8")
        assert "NaN" not in text and "Infinity" not in text
        assert [s.question for s in load_samples(path)] == ["q1", "q2"]
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    path = tmp_path / "traces.jsonl"
    provider, _ = memory_provider(SimpleSpanProcessor(OTLPJsonFileExporter(path)))
    with provider.get_tracer("t").start_as_current_span("s", attributes={"nan": math.nan, "inf": math.inf, "x": 1.5}):
        pass
    (line,) = path.read_text(encoding="utf-8").splitlines()
    _strict(line)  # the protobuf JSON mapping spells them "NaN" / "Infinity"
    (span,) = read_otlp_json(path)
    assert math.isnan(span.attributes["nan"]) and span.attributes["inf"] == math.inf and span.attributes["x"] == 1.5


@pytest.mark.parametrize("where", ["context score", "grade", "threshold", "fail-under"])
def test_nan_where_a_number_is_read_is_an_error_naming_the_field(tmp_path, capsys, where):
    if where == "context score":
        ds = rm.data.samples_from_records(
            [
                {"question": "q", "contexts": [{"text": "c", "score": math.nan}]},
                {"question": "r", "contexts": [{"text": "c", "score": math.inf}]},
                {"question": "s", "contexts": [{"text": "c", "score": 10**400}]},
            ]
        )
        assert [(e.location, e.field) for e in ds.errors] == [
            ("record 1", "contexts[0]"),
            ("record 2", "contexts[0]"),
            ("record 3", "contexts[0]"),
        ]
        assert "finite number" in str(ds.errors[0])
    elif where == "grade":
        ds = rm.data.samples_from_records(
            [
                {"question": "q", "contexts": [], "relevant_ids": {"d": math.inf}},
                {"question": "r", "contexts": [], "relevant_ids": {"d": 10**400}},
            ]
        )
        assert [(e.location, e.field) for e in ds.errors] == [
            ("record 1", "relevant_ids"),
            ("record 2", "relevant_ids"),
        ]
    elif where == "threshold":
        with pytest.raises(ValueError, match="threshold"):
            OddValues().with_levels(threshold=math.nan)
    else:
        data = tmp_path / "d.jsonl"
        data.write_text(json.dumps({"question": "q", "contexts": ["c"], "relevant_ids": ["x"]}) + "\n")
        for value in ("nan", "inf", "mrr=NaN"):
            assert main(["evaluate", str(data), "-m", "mrr", "--no-progress", "--fail-under", value]) == 2
            assert "--fail-under" in capsys.readouterr().err


def test_a_score_cannot_carry_a_lone_surrogate_into_an_unwritable_report(tmp_path):
    """Sample text is validated when loaded; text a metric makes up is written as an escape."""
    with pytest.raises(rm.data.RecordError, match="question.*lone surrogate U\\+D800"):
        Sample("q\ud800", ["c"])
    bad = SampleResult(Sample("q", ["c"]), {"m": Score("m", None, explanation="saw \udcff in the reply")})
    result = EvaluationResult([bad], ["m"])
    for ext in REPORTS:
        path = result.save(tmp_path / f"r.{ext}")
        assert path.stat().st_size > 0
        path.read_text(encoding="utf-8")
    assert (
        _strict((tmp_path / "r.json").read_text(encoding="utf-8"))["samples"][0]["scores"]["m"]["explanation"]
        == "saw \udcff in the reply"
    )  # the escape reads back as the same text


@pytest.mark.slow  # a subprocess with a file-size limit (a full disk, without mounting one)
def test_a_failed_report_write_leaves_the_previous_report(tmp_path):
    script = textwrap.dedent("""
        import resource, signal, sys
        from ragmeter.data import Sample, Score
        from ragmeter.metrics.scoring import SampleResult
        from ragmeter.result import EvaluationResult
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG as an OSError instead of a kill
        result = EvaluationResult([SampleResult(Sample("q" * 100_000, ["c"]), {"m": Score("m", 0.5)})], ["m"])
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        for path in sys.argv[1:]:
            try:
                result.save(path)
                print("written")
            except OSError as exc:
                print("failed", exc.errno)
    """)
    paths = [tmp_path / f"report.{ext}" for ext in ("jsonl", "json", "csv")]
    for p in paths:
        p.write_text("previous report\n")
    out = subprocess.run([sys.executable, "-c", script, *map(str, paths)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["failed", "27"] * 3  # EFBIG
    for p in paths:
        assert p.read_text() == "previous report\n"  # not truncated, not empty
    assert sorted(x.name for x in tmp_path.iterdir()) == sorted(p.name for p in paths)  # no temporary file left


def test_a_report_that_cannot_be_written_does_not_lose_the_others(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"question": "q", "contexts": [{"id": "x", "text": "c"}], "relevant_ids": ["x"]}) + "\n")
    good = tmp_path / "r.json"
    code = main(
        ["evaluate", str(data), "-m", "mrr", "--no-progress", "-o", str(tmp_path / "missing" / "r.md"), "-o", str(good)]
    )
    err = capsys.readouterr().err
    assert code == 2 and "could not write" in err and "Traceback" not in err
    assert _strict(good.read_text())["summary"]["mrr"]["count"] == 1
    # an unknown report type is refused before anything is scored
    assert main(["evaluate", str(data), "-m", "mrr", "--no-progress", "-o", str(tmp_path / "r.txt")]) == 2
    assert "unknown report type '.txt'" in capsys.readouterr().err


def _leaky_result():
    return rm.evaluate(
        [Sample("q1", ["c"], answer="a"), Sample("explain", ["c"], answer="b")], [Leaky()], progress=False
    )


def test_a_key_in_an_error_reaches_no_report(tmp_path, capsys):
    result = _leaky_result()
    errors = [s.error for s in result.scores("leaky") if s.error]
    assert errors and all(KEY not in e and "eyJhbGci" not in e and "hunter22" not in e for e in errors)
    assert "[REDACTED]" in errors[0] and "401 from gateway" in errors[0]  # the reason stays readable
    texts = [result.to_json(), result.to_jsonl(), result.to_markdown(), result.to_html(), repr(result.to_records())]
    for ext in REPORTS:
        texts.append(result.save(tmp_path / f"r.{ext}").read_text(encoding="utf-8"))
    assert main(["report", str(tmp_path / "r.jsonl"), "-o", str(tmp_path / "again.html")]) == 0
    texts += [capsys.readouterr().out, (tmp_path / "again.html").read_text()]
    for text in texts:
        assert KEY not in text and "eyJhbGci" not in text and "hunter22" not in text


def test_a_key_in_an_old_results_file_is_redacted_when_read(tmp_path):
    path = tmp_path / "old.jsonl"
    score = {"metric": "m", "value": None, "error": f"401: api_key={KEY}", "explanation": ""}
    path.write_text(
        json.dumps({"ragmeter": "results", "metrics": ["m"]})
        + "\n"
        + json.dumps({"sample": {"question": "q"}, "scores": {"m": score}})
        + "\n"
    )
    result = EvaluationResult.from_jsonl(path)
    assert KEY not in result.to_json() and result.scores("m")[0].error == "401: api_key=[REDACTED]"


@pytest.mark.slow  # importing pandas takes ~0.7 s
def test_a_key_in_an_error_reaches_no_dataframe():
    pytest.importorskip("pandas")
    df = _leaky_result().to_pandas()
    assert KEY not in df.to_csv() and "[REDACTED]" in df.to_csv()
