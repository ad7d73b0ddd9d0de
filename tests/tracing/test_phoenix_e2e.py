"""End to end over the wire: a real OpenInference-instrumented LangChain RAG chain, scored by
RagmeterSpanProcessor, exported with the real OTLP/HTTP exporter to a real Arize Phoenix server
on 127.0.0.1, then read back through Phoenix's REST and GraphQL APIs: the evaluation carrier
(parent, attributes, events) and the span and document annotations of PhoenixAnnotationSink.

The server is the ``phoenix`` command of an ``arize-phoenix`` install (its own virtualenv, it
pins many packages): ``$RAGMETER_PHOENIX_BIN``, else ``phoenix`` on PATH. Without it the test
is skipped, unless ``RAGMETER_REQUIRE_PHOENIX=1`` (CI), which makes a missing server a failure.
Phoenix takes tens of seconds to import, so the server is started when this module is imported
(collection time) and boots while the other tests run.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

from helpers.process import free_port

pytestmark = [pytest.mark.phoenix, pytest.mark.slow]

REQUIRE = os.environ.get("RAGMETER_REQUIRE_PHOENIX") == "1"
START_TIMEOUT = float(os.environ.get("RAGMETER_PHOENIX_START_TIMEOUT", "240"))


def _phoenix_bin() -> str | None:
    path = os.environ.get("RAGMETER_PHOENIX_BIN") or shutil.which("phoenix")
    return path if path and os.access(path, os.X_OK) else None


class PhoenixServer:
    """A Phoenix server subprocess on 127.0.0.1 with a throwaway working directory."""

    def __init__(self, binary: str):
        self.dir = Path(tempfile.mkdtemp(prefix="ragmeter-phoenix-"))
        self.port = free_port()
        self.grpc_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(
            os.environ,
            PHOENIX_HOST="127.0.0.1",
            PHOENIX_PORT=str(self.port),
            PHOENIX_GRPC_PORT=str(self.grpc_port),
            PHOENIX_WORKING_DIR=str(self.dir),
            PHOENIX_TELEMETRY_ENABLED="false",
            PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
        )
        for key in ("PHOENIX_COLLECTOR_ENDPOINT", "PHOENIX_SQL_DATABASE_URL", "PHOENIX_API_KEY", "PHOENIX_ENABLE_AUTH"):
            env.pop(key, None)
        self.log = open(self.dir / "phoenix.log", "wb")
        self.proc = subprocess.Popen(
            [binary, "serve"],
            cwd=self.dir,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.started = time.monotonic()

    def log_tail(self, n: int = 4000) -> str:
        try:
            return (self.dir / "phoenix.log").read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def wait_ready(self, timeout: float) -> None:
        """Wait until /healthz answers, at most ``timeout`` seconds after the start. The server may
        have been started early (at collection) and the deadline be past when the first test asks:
        it is then asked once more, not given up on unasked."""
        end = self.started + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"phoenix exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() >= end:
                raise TimeoutError(f"phoenix not ready after {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.25)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


_BIN = _phoenix_bin()
_EARLY: PhoenixServer | None = None
if _BIN and os.environ.get("RAGMETER_PHOENIX_EARLY_START", "1") == "1":
    try:
        _EARLY = PhoenixServer(_BIN)
        atexit.register(_EARLY.stop)
    except OSError:
        _EARLY = None


@pytest.fixture(scope="module")
def phoenix():
    if _BIN is None:
        msg = "no Phoenix server: set RAGMETER_PHOENIX_BIN or put `phoenix` (pip install arize-phoenix) on PATH"
        if REQUIRE:
            pytest.fail(msg + " (RAGMETER_REQUIRE_PHOENIX=1)")
        pytest.skip(msg)
    server = _EARLY if _EARLY is not None and _EARLY.proc.poll() is None else PhoenixServer(_BIN)
    try:
        server.wait_ready(START_TIMEOUT)
        yield server
    finally:
        server.stop()


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"{}")


def _poll(fn, timeout: float = 30.0, what: str = "condition"):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            last = fn()
            if last:
                return last
        except (urllib.error.URLError, OSError, KeyError, ValueError) as err:
            last = err
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


class _RestSpans:
    """Phoenix's annotation endpoints, for when arize-phoenix-client is not installed."""

    def __init__(self, base: str):
        self.base = base

    def log_span_annotations(self, *, span_annotations, sync=False):
        _post(self.base + "/v1/span_annotations", {"data": list(span_annotations)})

    def log_document_annotations(self, *, document_annotations, sync=False):
        _post(self.base + "/v1/document_annotations", {"data": list(document_annotations)})


class _RestClient:
    def __init__(self, base: str):
        self.spans = _RestSpans(base)


def _client(base: str):
    try:
        from phoenix.client import Client
    except ImportError:
        return _RestClient(base)
    return Client(base_url=base)


def test_carrier_and_annotations_reach_a_real_phoenix_server(phoenix):
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from helpers.tracing import ContextCount, instrumented, langchain_chain
    from ragmeter.judges import OfflineJudge
    from ragmeter.tracing import PhoenixAnnotationSink, RagmeterSpanProcessor

    project = f"ragmeter-e2e-{uuid.uuid4().hex[:8]}"
    provider = TracerProvider(
        resource=Resource({"service.name": "ragmeter-e2e", "openinference.project.name": project}),
        shutdown_on_exit=False,
    )
    sink = PhoenixAnnotationSink(_client(phoenix.url))
    proc = RagmeterSpanProcessor(
        [ContextCount(), "faithfulness", "context_precision", "citation_accuracy"],
        OfflineJudge(embeddings=False),
        tracer_provider=provider,
        sinks=[sink],
    )
    provider.add_span_processor(proc)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=phoenix.url + "/v1/traces")))
    with instrumented(LangChainInstrumentor, provider):
        with provider.get_tracer("e2e.http").start_as_current_span("POST /ask") as request:
            langchain_chain().invoke("What is the capital of France?")
    assert provider.force_flush(60_000)
    provider.shutdown()
    assert proc.stats["carriers_written"] == 1 and sink.stats["failed"] == 0, (proc.stats, sink.stats)

    trace_id = format(request.get_span_context().trace_id, "032x")
    q = urllib.parse.urlencode({"trace_id": trace_id, "limit": 100})

    def spans():
        data = _get(f"{phoenix.url}/v1/projects/{project}/spans?{q}")["data"]
        return data if any(s["name"] == "ragmeter.evaluation" for s in data) and len(data) >= 9 else None

    got = _poll(spans, what="the trace and its evaluation span in Phoenix")
    by_id = {s["context"]["span_id"]: s for s in got}
    carrier = next(s for s in got if s["name"] == "ragmeter.evaluation")
    root = next(
        s
        for s in got
        if s["name"] == "RunnableSequence" and by_id.get(s.get("parent_id"), {}).get("name") == "POST /ask"
    )
    retriever = next(s for s in got if s["span_kind"] == "RETRIEVER")
    assert carrier["context"]["trace_id"] == trace_id
    assert carrier["parent_id"] == root["context"]["span_id"]
    assert carrier["span_kind"] == "EVALUATOR"
    a = carrier["attributes"]
    assert a["ragmeter.carrier"] is True
    assert a["ragmeter.target.span_id"] == root["context"]["span_id"]
    assert a["ragmeter.context_count.score"] == 0.75 and a["ragmeter.context_count.label"] == "pass"
    assert a["ragmeter.faithfulness.label"] in ("pass", "warn", "fail")
    assert a["ragmeter.citation.count"] == 1
    names = {a[f"evaluations.{i}.evaluation.name"] for i in range(4)}
    assert names == {"context_count", "faithfulness", "context_precision", "citation_accuracy"}
    events = [e["name"] for e in carrier["events"]]
    assert events.count("gen_ai.evaluation.result") == 4 and "ragmeter.citation.verdicts" in events

    root_id = root["context"]["span_id"]

    def annotations():
        data = _get(f"{phoenix.url}/v1/projects/{project}/span_annotations?span_ids={root_id}")["data"]
        return data if len(data) == 4 else None

    anns = {x["name"]: x for x in _poll(annotations, what="span annotations")}
    assert anns["context_count"]["result"]["score"] == 0.75
    assert anns["context_count"]["annotator_kind"] == "CODE"
    assert anns["faithfulness"]["identifier"].endswith(f"/faithfulness/{root_id}")

    def documents():
        query = "query($id: ID!) { node(id: $id) { ... on Span { documentEvaluations { name score label documentPosition } } } }"
        body = _post(phoenix.url + "/graphql", {"query": query, "variables": {"id": retriever["id"]}})
        evs = body["data"]["node"]["documentEvaluations"]
        return evs if len(evs) == 3 else None

    docs = _poll(documents, what="document annotations")
    assert sorted((d["name"], d["documentPosition"]) for d in docs) == [("context_precision", i) for i in range(3)]
    assert all(d["label"] in ("useful", "not_useful") for d in docs)


def test_evaluate_traces_says_when_phoenix_has_none_of_the_judged_spans(phoenix, tmp_path, capsys):
    """``evaluate-traces --phoenix``: Phoenix accepts annotations for spans it does not have (and
    shows none of them), so the command asks it which judged spans it stores and says so: an
    error when it has none; after the traces were sent there, the same run succeeds."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from helpers.tracing import oi_rag
    from ragmeter.cli import main
    from ragmeter.tracing.offline import encode_otlp_json

    project = f"ragmeter-check-{uuid.uuid4().hex[:8]}"
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource({"service.name": "rag-api", "openinference.project.name": project}), shutdown_on_exit=False
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    chain, _ = oi_rag(provider)
    spans = exporter.get_finished_spans()
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(encode_otlp_json(spans)) + "\n")
    args = ["evaluate-traces", str(path), "-m", "mrr", "--no-progress", "--phoenix", phoenix.url]

    assert main(args) == 2
    out, err = capsys.readouterr()
    assert f"sent 1 span and 0 document annotations to Phoenix at {phoenix.url}; it has 0 of the 1 judged spans" in out
    assert (
        f"ragmeter: error: Phoenix at {phoenix.url} has none of the 1 judged spans, so it shows none of the annotations"
    ) in err

    assert OTLPSpanExporter(endpoint=phoenix.url + "/v1/traces").export(spans).name == "SUCCESS"
    span_id = format(chain.get_span_context().span_id, "016x")
    _poll(
        lambda: _get(f"{phoenix.url}/v1/projects/{project}/spans?span_id={span_id}")["data"],
        what="the trace in Phoenix",
    )
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "it has 1 of the 1 judged spans" in out and "error" not in err
    anns = _poll(
        lambda: _get(f"{phoenix.url}/v1/projects/{project}/span_annotations?span_ids={span_id}")["data"],
        what="the span annotation",
    )
    assert [a["name"] for a in anns] == ["mrr"]
