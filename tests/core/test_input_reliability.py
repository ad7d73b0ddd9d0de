"""Bad input never loses the file (issue 13, items 3-5): a table of bad records in JSONL, JSON, CSV
and OTLP exports. For every case: no uncaught exception, the good records are scored, each bad
one is reported as a RecordError naming its line / record (and the field where there is one), and
every report written from the run is strict JSON / readable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.tracing import ContextCount, memory_provider, oi_rag
from ragmeter.cli import main
from ragmeter.readers import load_samples
from ragmeter.tracing import evaluate_traces
from ragmeter.tracing.offline import encode_otlp_json

BIG = "1" * 5000  # over Python's 4300-digit int <-> str limit
DEEP = "[" * 100_000 + "]" * 100_000  # RecursionError in json.loads


def _good(n: int, **extra) -> dict:
    return {
        "question": f"q{n}",
        "contexts": [{"id": f"d{n}", "text": f"chunk {n}"}],
        "answer": f"a{n}",
        "relevant_ids": [f"d{n}"],
        **extra,
    }


def _line(n: int, **extra) -> bytes:
    return json.dumps(_good(n, **extra)).encode()


def _jsonl(*middle: bytes) -> bytes:
    """Good line 1, the given lines, good last line."""
    return b"\n".join([_line(1), *middle, _line(99)]) + b"\n"


def _swap(n: int, old: str, new: str) -> bytes:
    """A good record's JSON with ``old`` replaced by raw ``new`` (to plant what json.dumps won't write)."""
    text = json.dumps(_good(n))
    assert old in text
    return (
        text.replace(old, new, 1).encode("utf-8", "surrogatepass")
        if isinstance(new, str)
        else text.encode().replace(old.encode(), new, 1)
    )


def _json_array(*middle: bytes, wrap: str | None = None) -> bytes:
    body = b"[\n" + b",\n".join([_line(1), *middle, _line(99)]) + b"\n]"
    return (b'{"' + wrap.encode() + b'": ' + body + b"}") if wrap else body


def _csv(*rows: bytes, bom: bool = False) -> bytes:
    head = b"\xef\xbb\xbf" if bom else b""
    return (
        head
        + b"question,contexts,answer,relevant_ids\n"
        + b"\n".join(
            [
                b'q1,"[{""id"": ""d1"", ""text"": ""c""}]",a1,"[""d1""]"',
                *rows,
                b'q99,"[{""id"": ""d99"", ""text"": ""c""}]",a99,"[""d99""]"',
            ]
        )
        + b"\n"
    )


def _ctx_cell(json_text: str) -> bytes:
    return b'qx,"' + json_text.replace('"', '""').encode() + b'",ax,'


# (id, suffix, file bytes, good questions scored, {(location, field)} of the bad records)
SAMPLE_CASES = [
    # --- JSONL
    ("jsonl-non-utf8-in-string", ".jsonl", _jsonl(_swap(2, "q2", b"caf\xe9")), 2, {("line 2", "question")}),
    ("jsonl-non-utf8-outside-string", ".jsonl", _jsonl(b"\xff" + _line(2)), 2, {("line 2", None)}),
    ("jsonl-cp1252-answer", ".jsonl", _jsonl(_swap(2, "a2", "na\u00efve".encode("cp1252"))), 2, {("line 2", "answer")}),
    (
        "jsonl-5000-digit-score",
        ".jsonl",
        _jsonl(_swap(2, '"chunk 2"', f'"chunk 2", "score": {BIG}')),
        2,
        {("line 2", "contexts[0]")},
    ),
    (
        "jsonl-5000-digit-metadata",
        ".jsonl",
        _jsonl(_line(2, extra=None).replace(b"null", BIG.encode())),
        2,
        {("line 2", "metadata.extra")},
    ),
    ("jsonl-5000-digit-id", ".jsonl", _jsonl(_line(2, id=None).replace(b"null", BIG.encode())), 2, {("line 2", "id")}),
    ("jsonl-lone-surrogate-answer", ".jsonl", _jsonl(_swap(2, "a2", "\\ud800")), 2, {("line 2", "answer")}),
    (
        "jsonl-lone-surrogate-context",
        ".jsonl",
        _jsonl(_swap(2, "chunk 2", "\\udfff x")),
        2,
        {("line 2", "contexts[0]")},
    ),
    ("jsonl-lone-surrogate-question", ".jsonl", _jsonl(_swap(2, "q2", "q\\udc80")), 2, {("line 2", "question")}),
    (
        "jsonl-lone-surrogate-metadata-key",
        ".jsonl",
        _jsonl(_line(2, metadata={"k": 1}).replace(b'"k"', b'"\\ud801"')),
        2,
        {("line 2", "metadata")},
    ),
    ("jsonl-raw-surrogate-bytes", ".jsonl", _jsonl(_swap(2, "q2", b"\xed\xa0\x80")), 2, {("line 2", "question")}),
    (
        "jsonl-deep-nesting",
        ".jsonl",
        _jsonl(_line(2, metadata=None).replace(b"null", DEEP.encode())),
        2,
        {("line 2", None)},
    ),
    (
        "jsonl-nested-past-limit",
        ".jsonl",
        _jsonl(_line(2, metadata=None).replace(b"null", b'{"a":' + b"[" * 500 + b"]" * 500 + b"}")),
        2,
        {("line 2", "metadata.a")},
    ),
    (
        "jsonl-nan-score",
        ".jsonl",
        _jsonl(_swap(2, '"chunk 2"', '"chunk 2", "score": NaN')),
        2,
        {("line 2", "contexts[0]")},
    ),
    (
        "jsonl-infinity-score",
        ".jsonl",
        _jsonl(_swap(2, '"chunk 2"', '"chunk 2", "score": Infinity')),
        2,
        {("line 2", "contexts[0]")},
    ),
    (
        "jsonl-1e999-score",
        ".jsonl",
        _jsonl(_swap(2, '"chunk 2"', '"chunk 2", "score": 1e999')),
        2,
        {("line 2", "contexts[0]")},
    ),
    (
        "jsonl-nan-grade",
        ".jsonl",
        _jsonl(_line(2, relevant_ids={"d2": 1}).replace(b"1}", b"NaN}")),
        2,
        {("line 2", "relevant_ids")},
    ),
    (
        "jsonl-minus-infinity-grade",
        ".jsonl",
        _jsonl(_line(2, relevant_ids={"d2": 1}).replace(b"1}", b"-Infinity}")),
        2,
        {("line 2", "relevant_ids")},
    ),
    ("jsonl-bom", ".jsonl", b"\xef\xbb\xbf" + _jsonl(_line(2)), 3, set()),
    ("jsonl-truncated-last-line", ".jsonl", _jsonl(_line(2)) + _line(3)[:-9], 3, {("line 4", None)}),
    ("jsonl-array-line", ".jsonl", _jsonl(b"[1]"), 2, {("line 2", None)}),
    ("jsonl-null-line", ".jsonl", _jsonl(b"null"), 2, {("line 2", None)}),
    ("jsonl-u2028-in-string", ".jsonl", _jsonl(_swap(2, "a2", "a\u2028b\u2029c\u0085d")), 3, set()),
    ("jsonl-crlf", ".jsonl", _jsonl(_line(2)).replace(b"\n", b"\r\n"), 3, set()),
    ("jsonl-nul-in-string", ".jsonl", _jsonl(_swap(2, "a2", b"a\x00")), 2, {("line 2", None)}),
    # --- JSON
    ("json-bom", ".json", b"\xef\xbb\xbf" + _json_array(_line(2)), 3, set()),
    ("json-lone-surrogate", ".json", _json_array(_swap(2, "a2", "\\ud800")), 2, {("record 1", "answer")}),
    ("json-non-utf8", ".json", _json_array(_swap(2, "q2", b"\xff")), 2, {("record 1", "question")}),
    (
        "json-5000-digit",
        ".json",
        _json_array(_swap(2, '"chunk 2"', f'"chunk 2", "score": {BIG}')),
        2,
        {("record 1", "contexts[0]")},
    ),
    (
        "json-deep-nesting",
        ".json",
        _json_array(_line(2, metadata=None).replace(b"null", DEEP.encode())),
        2,
        {("record 1", None)},
    ),
    ("json-deep-nesting-in-samples", ".json", _json_array(DEEP.encode(), wrap="samples"), 2, {("record 1", None)}),
    (
        "json-syntax-error-in-one-record",
        ".json",
        _json_array(b'{"question": "q2", "contexts": [}'),
        2,
        {("record 1", None)},
    ),
    (
        "json-nan-score",
        ".json",
        _json_array(_swap(2, '"chunk 2"', '"chunk 2", "score": NaN')),
        2,
        {("record 1", "contexts[0]")},
    ),
    # --- CSV
    ("csv-bom", ".csv", _csv(b'q2,"[""c""]",a2,', bom=True), 3, set()),
    ("csv-cp1252", ".csv", _csv("caf\u00e9,\"[\"\"c\"\"]\",a2,".encode("cp1252")), 2, {("row 3", "question")}),
    ("csv-surrogate-bytes", ".csv", _csv(b'q\xed\xa0\x80,"[""c""]",a2,'), 2, {("row 3", "question")}),
    ("csv-deep-contexts", ".csv", _csv(_ctx_cell("[" * 5000 + "]" * 5000)), 2, {("row 3", "contexts")}),
    ("csv-nan-score", ".csv", _csv(_ctx_cell('[{"text": "c", "score": NaN}]')), 2, {("row 3", "contexts[0]")}),
    ("csv-5000-digit", ".csv", _csv(_ctx_cell('[{"text": "c", "score": ' + BIG + "}]")), 2, {("row 3", "contexts[0]")}),
    ("csv-too-many-cells", ".csv", _csv(b'q2,"[""c""]",a2,,extra'), 2, {("row 3", None)}),
    ("csv-cell-over-field-limit", ".csv", _csv(b'q2,"[""' + b"x" * 200_000 + b'""]",a2,'), 2, {("row 3", None)}),
    ("csv-lone-surrogate-in-json-cell", ".csv", _csv(_ctx_cell('["\\ud800"]')), 2, {("row 3", "contexts[0]")}),
]


def _strict_json(text: str):
    def refuse(name):
        raise ValueError(f"bare {name} in JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("case, suffix, data, good, bad", SAMPLE_CASES, ids=[c[0] for c in SAMPLE_CASES])
def test_a_bad_record_never_loses_the_file(tmp_path, capsys, case, suffix, data, good, bad):
    path = tmp_path / f"data{suffix}"
    path.write_bytes(data)
    ds = load_samples(path)
    assert {(e.location, e.field) for e in ds.errors} == bad, [str(e) for e in ds.errors]
    assert len(ds) == good
    # the CLI scores the good records and writes every report format, all readable
    outs = {ext: tmp_path / f"report.{ext}" for ext in ("json", "jsonl", "md", "html", "csv")}
    args = ["evaluate", str(path), "-m", "mrr", "--no-progress"]
    for o in outs.values():
        args += ["-o", str(o)]
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err
    report = _strict_json(outs["json"].read_text(encoding="utf-8"))
    assert len(report["samples"]) == good
    assert {(e["location"], e["field"]) for e in report["invalid_records"]} == bad
    for line in outs["jsonl"].read_text(encoding="utf-8").split("\n")[:-1]:  # JSON Lines: "\n" only
        _strict_json(line)
    for ext in ("md", "html", "csv"):
        outs[ext].read_text(encoding="utf-8")  # valid UTF-8
    assert main(["report", str(outs["jsonl"])]) == 0


def test_enough_cases():
    assert len(SAMPLE_CASES) + len(OTLP_CASES) >= 30


# --------------------------------------------------------------------------- OTLP exports


def _otlp_doc(question: str) -> dict:
    provider, exporter = memory_provider()
    oi_rag(provider, question=question)
    return encode_otlp_json(exporter.get_finished_spans())


def _otlp_line(question: str = "What is the capital of France?") -> bytes:
    return json.dumps(_otlp_doc(question)).encode()


def _otlp_file(*middle: bytes, last: bytes | None = None) -> bytes:
    lines = [_otlp_line("first?"), *middle, _otlp_line("second?")]
    text = b"\n".join(lines) + b"\n"
    return text + last if last is not None else text


def _broken_span(**changes) -> bytes:
    doc = _otlp_doc("broken?")
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span.update(changes)
    return json.dumps(doc).encode()


def _broken_attr(key: str, value) -> bytes:
    doc = _otlp_doc("broken?")
    for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for kv in span["attributes"]:
            if kv["key"] == key:
                kv["value"] = value
                return json.dumps(doc).encode()
    raise AssertionError(key)


# (id, file bytes, questions scored, locations of the unreadable parts). A span holding text that is
# not valid Unicode is unreadable itself (its trace's other spans are still read).
OTLP_CASES = [
    ("otlp-truncated-last-line", _otlp_file(last=_otlp_line("third?")[:-40]), 2, {"line 3"}),
    ("otlp-non-utf8-line", _otlp_file(_otlp_line("cafe?").replace(b"cafe", b"caf\xe9")), 2, {"line 2"}),
    ("otlp-resource-spans-1", _otlp_file(b'{"resourceSpans": [1]}'), 2, {"line 2"}),
    ("otlp-resource-spans-string", _otlp_file(b'{"resourceSpans": "x"}'), 2, {"line 2"}),
    ("otlp-scope-spans-x", _otlp_file(b'{"resourceSpans": [{"scopeSpans": "x"}]}'), 2, {"line 2"}),
    ("otlp-spans-1", _otlp_file(b'{"resourceSpans": [{"scopeSpans": [{"spans": [1]}]}]}'), 2, {"line 2"}),
    ("otlp-deep-nesting", _otlp_file(DEEP.encode()), 2, {"line 2"}),
    ("otlp-array-line", _otlp_file(b"[1]"), 2, {"line 2"}),
    ("otlp-bad-trace-id", _otlp_file(_broken_span(traceId="zz")), 2, {"line 2"}),
    ("otlp-5000-digit-int", _otlp_file(_broken_span(startTimeUnixNano=BIG)), 2, {"line 2"}),
    ("otlp-bad-attribute", _otlp_file(_broken_attr("input.value", {"arrayValue": "x"})), 2, {"line 2"}),
    ("otlp-5000-digit-int-value", _otlp_file(_broken_attr("input.value", {"intValue": BIG})), 2, {"line 2"}),
    ("otlp-bad-double", _otlp_file(_broken_attr("input.value", {"doubleValue": "many"})), 2, {"line 2"}),
    ("otlp-bom", b"\xef\xbb\xbf" + _otlp_file(), 2, set()),
    (
        "otlp-nan-document-score",
        _otlp_file(_broken_attr("retrieval.documents.0.document.score", {"doubleValue": "NaN"})),
        3,
        set(),
    ),
    ("otlp-lone-surrogate-question", _otlp_file(_otlp_line("\ud800?")), 2, {"line 2"}),
]


@pytest.mark.parametrize("case, data, good, bad", OTLP_CASES, ids=[c[0] for c in OTLP_CASES])
def test_a_bad_line_never_loses_the_trace_export(tmp_path, capsys, case, data, good, bad):
    path = tmp_path / "traces.jsonl"
    path.write_bytes(data)
    result = evaluate_traces(path, metrics=[ContextCount()], progress=False)
    assert len(result) == good
    unreadable = [e for e in result.invalid if not e.location.startswith("trace ")]
    assert {e.location for e in unreadable} == bad, [str(e) for e in result.invalid]
    assert result.trace_stats.get("unreadable", 0) == len(unreadable)
    report = tmp_path / "r.json"
    result.save(report)
    _strict_json(report.read_text(encoding="utf-8"))
    code = main(["evaluate-traces", str(path), "-m", "mrr", "--no-progress", "-o", str(tmp_path / "r.jsonl")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err
    if bad:
        assert f"{len(unreadable)} unreadable" in out


def test_an_export_with_nothing_readable_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b'{"resourceSpans": [1]}\n{"trunc')
    with pytest.raises(ValueError, match="no spans found.*2 unreadable"):
        evaluate_traces(path, metrics=[ContextCount()], progress=False)
    assert main(["evaluate-traces", str(path), "-m", "mrr", "--no-progress"]) == 2
    assert "Traceback" not in capsys.readouterr().err


# --------------------------------------------------------------------------- ragmeter report on bad results files


def _results_file(tmp_path: Path) -> Path:
    data = tmp_path / "d.jsonl"
    data.write_bytes(_jsonl(_line(2)))
    out = tmp_path / "run.jsonl"
    assert main(["evaluate", str(data), "-m", "mrr", "--no-progress", "-o", str(out)]) == 0
    return out


@pytest.mark.parametrize(
    "content",
    [
        "[1]",
        "1",
        "null",
        '"x"',
        "{}",
        DEEP,
        '{"ragmeter": "results", "thresholds": 5}',
        '{"ragmeter": "results", "thresholds": {"mrr": [NaN, 0.5]}}',
        '{"ragmeter": "results", "metrics": 3}',
        '{"ragmeter": "results"}\n[1]',
        '{"ragmeter": "results"}\n{"sample": 1, "scores": {}}',
        '{"ragmeter": "results"}\n{"sample": {"question": "q"}, "scores": [1]}',
        '{"ragmeter": "results"}\n{"sample": {"question": "q"}, "scores": {"m": 1}}',
        '{"ragmeter": "results"}\n{"sample": {"question": "q"}, "scores": {"m": {"metric": "m", "value": NaN}}}',
        '{"ragmeter": "results"}\n' + DEEP,
        '{"ragmeter": "results"}\n{"sample": {"question": "q"}, "scores": {}, "usage": 3}',
        '{"ragmeter": "results", "invalid_records": [1]}',
    ],
    ids=lambda c: c[:40],
)
def test_report_on_a_malformed_results_file_is_a_clear_error(tmp_path, capsys, content):
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    code = main(["report", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("ragmeter: error:") and "Traceback" not in err
    assert main(["compare", str(path), str(path)]) == 2


def test_report_reads_back_a_bom_and_a_good_file(tmp_path, capsys):
    out = _results_file(tmp_path)
    assert main(["report", str(out)]) == 0
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + out.read_bytes())
    assert main(["report", str(bom)]) == 0
