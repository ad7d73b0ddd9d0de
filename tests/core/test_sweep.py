"""Parameter sweeps: a plain function, a real LangChain runnable and a LlamaIndex query engine as
pipelines; means worked out by hand; judge cost per setting from the real OpenAI SDK against
the fake server; one stand-alone SVG chart per metric and parameter."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

import ragmeter as rm
from helpers import ROOT
from helpers.servers import FakeLLMServer
from ragmeter.sweep import run_pipeline

CHUNKS = {"a": "Paris is the capital of France.", "b": "France is in Europe.", "c": "Dune is a novel."}
ORDER = ["a", "c", "b"]
QUESTION = rm.Sample("Where is Paris?", relevant_ids=["a", "b"], reference="Paris is in France, in Europe.")


def build(top_k: int, chunk_size: int):
    """A function pipeline: the first ``top_k`` chunks of ORDER (chunk_size only changes the name)."""
    return lambda q: (f"Paris ({chunk_size}).", [{"id": i, "text": CHUNKS[i]} for i in ORDER[:top_k]])


def test_function_pipeline_table_and_charts(tmp_path):
    table = rm.sweep(
        build,
        {"top_k": [1, 2, 3], "chunk_size": [256, 512]},
        [QUESTION],
        metrics=["recall@3", "precision@3"],
        charts=tmp_path,
        progress=False,
    )
    # retrieved a | a c | a c b; relevant a, b: recall 1/2, 1/2, 2/2; precision@3 1/3, 1/3, 2/3
    got = [(r["top_k"], r["chunk_size"], r["recall@3"], round(r["precision@3"], 4)) for r in table.rows]
    assert got == [
        (1, 256, 0.5, 0.3333),
        (1, 512, 0.5, 0.3333),
        (2, 256, 0.5, 0.3333),
        (2, 512, 0.5, 0.3333),
        (3, 256, 1.0, 0.6667),
        (3, 512, 1.0, 0.6667),
    ]
    assert all(r["samples"] == 1 and r["pipeline_errors"] == 0 and r["judge_calls"] == 0 for r in table.rows)
    assert table.metrics == ["recall@3", "precision@3", "response_time"]  # the pipeline's latency is scored too
    assert table.best("recall@3")["top_k"] == 3
    assert table.results[1].results[0].sample.answer == "Paris (512)."
    assert table.to_markdown().splitlines()[2].startswith("| 1 | 256 | 0.5000 | 0.3333 |")
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == sorted(
        f"{m}_vs_{p}.svg" for m in ("recall_3", "precision_3", "response_time") for p in ("top_k", "chunk_size")
    )
    svg = ET.fromstring((tmp_path / "recall_3_vs_top_k.svg").read_text())  # well-formed, stand-alone
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    titles = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}title")]
    assert "top_k=1: mean 0.5000 (2 values)" in titles and "top_k=3: mean 1.0000 (2 values)" in titles
    # against chunk_size, top_k is averaged over: (1/2 + 1/2 + 1) / 3 at each size
    titles = [
        t.text for t in ET.fromstring(table.chart("recall@3", "chunk_size")).iter("{http://www.w3.org/2000/svg}title")
    ]
    assert "chunk_size=256: mean 0.6667 (3 values)" in titles


def test_pipeline_failures_are_counted_not_scored():
    def build_failing(top_k):
        def pipeline(q):
            if "boom" in q:
                raise RuntimeError("index offline")
            return "Paris.", [{"id": "a", "text": CHUNKS["a"]}]

        return pipeline

    table = rm.sweep(build_failing, {"top_k": [1]}, ["Where is Paris?", "boom?"], metrics=["mrr"], progress=False)
    assert table.rows[0]["samples"] == 1 and table.rows[0]["pipeline_errors"] == 1
    assert table.errors == [(0, "boom?", "RuntimeError: index offline")]
    assert [str(e) for e in table.results[0].invalid] == [
        "question 2: the pipeline failed: RuntimeError: index offline"
    ]
    with pytest.raises(ValueError, match="at least one value"):
        rm.sweep(build_failing, {"top_k": []}, ["q"], metrics=["mrr"])


def test_judge_cost_is_reported_per_setting():
    pytest.importorskip("openai")
    from ragmeter.judges.openai import OpenAIJudge
    from ragmeter.judges.pricing import cost_of, price_for
    from ragmeter.metrics.answer import AnswerRelevancy

    questions = [rm.Sample("Where is Paris?"), rm.Sample("What is Dune?")]
    with FakeLLMServer() as server:
        judge = OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key="test", cache=False)
        table = rm.sweep(
            build,
            {"top_k": [1, 2], "chunk_size": [256]},
            questions,
            metrics=[AnswerRelevancy(method="rating")],
            judge=judge,
            progress=False,
        )
        assert len(server.chat_requests) == 4  # one rate_answer per question and setting
    for row in table.rows:  # the fake server bills 100 prompt + 20 completion tokens per request
        assert row["judge_calls"] == 2 and row["tokens"] == 240
        assert row["cost_usd"] == pytest.approx(cost_of(price_for("gpt-4o-mini"), 200, 40))
        assert row["answer_relevancy"] is not None


def test_langchain_runnable_pipeline():
    pytest.importorskip("langchain_core")
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableParallel, RunnablePassthrough

    docs = [
        Document(id="doc-paris", page_content="Paris is the capital of France."),
        Document(id="doc-berlin", page_content="Berlin is the capital of Germany."),
        Document(id="doc-dune", page_content="Dune was written by Frank Herbert."),
    ]

    class OverlapRetriever(BaseRetriever):
        """The ``k`` documents sharing the most words with the query (ties: listed order)."""

        k: int

        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            q = set(query.lower().strip("?").split())
            ranked = sorted(docs, key=lambda d: -len(q & set(d.page_content.lower().strip(".").split())))
            return ranked[: self.k]

    prompt = ChatPromptTemplate.from_messages([("system", "Context: {context}"), ("human", "{question}")])

    def build_chain(top_k):
        model = FakeListChatModel(responses=[f"answer with {top_k}"])
        return RunnableParallel(context=OverlapRetriever(k=top_k), question=RunnablePassthrough()).assign(
            answer=prompt | model | StrOutputParser()
        )

    questions = [
        rm.Sample("What is the capital of France?", relevant_ids=["doc-paris", "doc-berlin"]),
        rm.Sample("Who wrote Dune?", relevant_ids=["doc-dune"]),
    ]
    answer, contexts = run_pipeline(build_chain(2), "Who wrote Dune?")
    assert answer == "answer with 2" and [c.id for c in contexts] == ["doc-dune", "doc-paris"]
    table = rm.sweep(build_chain, {"top_k": [1, 2]}, questions, metrics=["recall@2", "mrr"], progress=False)
    # France: paris | paris berlin -> recall 1/2, 1; Dune: dune -> 1, 1
    assert [(r["top_k"], r["recall@2"], r["mrr"]) for r in table.rows] == [(1, 0.75, 1.0), (2, 1.0, 1.0)]
    assert [s.sample.answer for s in table.results[0]] == ["answer with 1"] * 2


@pytest.mark.slow  # imports LlamaIndex
def test_llamaindex_query_engine_pipeline():
    pytest.importorskip("llama_index.core")
    from helpers.llamaindex_app import build_index, code_of, engine, question

    index = build_index()
    animals = ["otter", "heron"]
    qs = [rm.Sample(question(a), relevant_ids=[f"doc-{a}"], reference=f"{code_of(a)}") for a in animals]
    table = rm.sweep(
        lambda top_k: engine(index, top_k=top_k), {"top_k": [1, 3]}, qs, metrics=["hit_rate@3"], progress=False
    )
    for row, res in zip(table.rows, table.results):
        for r in res:
            assert len(r.sample.contexts) == row["top_k"]
            assert all(c.id.startswith("doc-") and c.score is not None for c in r.sample.contexts)
            assert r.sample.answer
    assert table.rows[1]["hit_rate@3"] >= table.rows[0]["hit_rate@3"]


# --------------------------------------------------------------------------- PNG charts, the store and the dashboard


def decode_png(data: bytes):
    """An 8-bit RGB, unfiltered PNG (what ragmeter writes) as a (height, width, 3) array, every
    chunk's CRC checked: a decoder independent of the encoder's code."""
    import struct
    import zlib

    import numpy as np

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,), tag = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        body, (crc,) = data[pos + 8 : pos + 8 + length], struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(tag + body) == crc, tag
        chunks[tag] = chunks.get(tag, b"") + body
        pos += 12 + length
    w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, color, interlace) == (8, 2, 0) and b"IEND" in chunks
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), dtype=np.uint8).reshape(h, 1 + 3 * w)
    assert not rows[:, 0].any()  # filter type 0 on every row
    return rows[:, 1:].reshape(h, w, 3)


def test_png_charts_draw_the_same_points(tmp_path):
    table = rm.sweep(
        lambda top_k: build(top_k, 256), {"top_k": [1, 2, 3]}, [QUESTION], metrics=["recall@3"], progress=False
    )
    paths = table.save_charts(tmp_path, format="png")
    assert sorted(p.name for p in paths) == ["recall_3_vs_top_k.png", "response_time_vs_top_k.png"]
    img = decode_png((tmp_path / "recall_3_vs_top_k.png").read_bytes())
    assert img.shape == (340, 720, 3)  # 360 x 170 logical pixels at scale 2
    # plot area x 30..350, y 10..140 (value v at y = 10 + 130 (1 - v)); recall 0.5, 0.5, 1.0 at x = 30, 190, 350;
    # levels: pass 0.8, warn 0.6 -> points red, red, green; the line blue between them
    red, green, blue, white = (207, 34, 46), (26, 127, 55), (9, 105, 218), (255, 255, 255)
    px = lambda x, y: tuple(int(c) for c in img[round(2 * y), round(2 * x)])  # noqa: E731
    assert px(30, 75) == red and px(190, 75) == red and px(350, 10) == green
    assert px(110, 75) == blue and px(270, 42.5) == blue  # halfway along each segment
    assert px(110, 100) == white and px(5, 160) == white
    # dashed pass / warn levels: 4 on, 3 off from x = 30; x = 110 is 3 into a dash, x = 112 in a gap
    assert px(110, 10 + 130 * 0.2) == green and px(110, 10 + 130 * 0.4) == (227, 155, 45)
    assert px(112, 10 + 130 * 0.4) == white
    with pytest.raises(ValueError, match="'svg' or 'png'"):
        table.save_charts(tmp_path, format="jpg")


def test_sweep_recorded_in_the_store_shows_in_the_dashboard(tmp_path):
    from ragmeter.dashboard import render_store
    from ragmeter.dashboard.sweeps import stored_sweeps
    from ragmeter.store import Store

    with Store(tmp_path / "h.db") as store:
        store.record_run(rm.evaluate([QUESTION], metrics=["mrr"], progress=False), dataset="nightly")
        table = rm.sweep(
            build,
            {"top_k": [1, 3], "chunk_size": [256, "big"]},
            [QUESTION],
            metrics=["recall@3"],
            progress=False,
            store=store,
        )
        assert len(table.run_ids) == 4
        infos = store.runs(kind="sweep")
        assert [i.tags for i in reversed(infos)] == [
            ["top_k=1", "chunk_size=256"],
            ["top_k=1", "chunk_size=big"],
            ["top_k=3", "chunk_size=256"],
            ["top_k=3", "chunk_size=big"],
        ]
        assert len({i.source for i in infos}) == 1 and infos[0].source.startswith("sweep:")
        (sweep,) = stored_sweeps(store)
        assert sweep.params == ["top_k", "chunk_size"] and sweep.settings[1] == {"top_k": 1, "chunk_size": "big"}
        assert sweep.metrics == ["recall@3", "response_time"]
        html = render_store(store)
    # the sweep settings are not runs of the trends: the one evaluate run is the page's run
    assert "One run on this page" in html and "Summary <span class=\"muted\">(run 1, 1 samples)" in html
    section = html[html.index('<section id="sweeps">') :]
    section = section[: section.index("</section>")]
    assert section.count("<tr>") == 1 + 4  # header + one row per setting
    assert section.count('data-chart="') == 2 * 2  # recall@3 and response_time against each parameter
    # recall@3 against top_k: top_k=1 -> 1/2 over both chunk sizes, top_k=3 -> 2/2
    assert "<title>top_k=1: mean 0.5000 (2 values)</title>" in section
    assert "<title>top_k=3: mean 1.0000 (2 values)</title>" in section
    assert section.count("<td class=\"num\" data-cost>$0.000000</td>") == 4  # no judge: no cost, shown next to quality


def test_sweep_store_path_opens_a_store_and_keeps_pipeline_failures(tmp_path):
    from ragmeter.dashboard import render_store
    from ragmeter.store import Store

    def build_failing(top_k):
        def pipeline(q):
            if "boom" in q:
                raise RuntimeError("index offline")
            return build(top_k, 256)(q)

        return pipeline

    table = rm.sweep(
        build_failing,
        {"top_k": [2]},
        [QUESTION, rm.Sample("boom?")],
        metrics=["mrr"],
        progress=False,
        store=tmp_path / "s.db",
    )
    with Store(tmp_path / "s.db") as store:
        assert [i.id for i in store.runs(kind="sweep")] == table.run_ids == [1]
        run = store.run(1)
        assert run.summary()["mrr"]["mean"] == 1.0
        assert [str(e) for e in run.invalid] == ["question 2: the pipeline failed: RuntimeError: index offline"]
        html = render_store(store)  # a store holding only a sweep still has a page
    row = html[html.index('<table class="sweep-table">') :].split("<tbody>")[1].split("</tr>")[0]
    assert (
        '<td class="num">1</td><td class="num" title="question 2: the pipeline failed: RuntimeError: index offline">1</td>'
        in row
    )


def test_unreadable_questions_are_reported_with_each_setting():
    table = rm.sweep(
        lambda top_k: build(top_k, 256),
        {"top_k": [1, 2]},
        [QUESTION, "Where is Dune?", {"answer": "x"}],
        metrics=["mrr"],
        progress=False,
    )
    assert [r["samples"] for r in table.rows] == [2, 2]  # a plain string in a list of Samples is a question
    for res in table.results:
        assert [str(e) for e in res.invalid] == [
            "record 3: field 'question': missing (accepted names: question, user_input, input, query)"
        ]


@pytest.mark.slow  # writes a store and six PNG files
def test_sweep_dashboard_example(tmp_path, capsys):
    import runpy
    import sys

    example = ROOT / "examples" / "sweep_dashboard.py"
    argv, sys.argv = sys.argv, [str(example), str(tmp_path)]
    try:
        runpy.run_path(str(example), run_name="__main__")
    finally:
        sys.argv = argv
    out = capsys.readouterr().out
    # mode "long", top_k 1: Q1 finds eiffel-1 first (RR 1); Q2 ties eiffel-1 / eiffel-2 (listed order: RR 0 at k=1);
    # Q3's long words match no chunk ("Lisa" is 4 letters: RR 0); Q4 finds rome-1 (RR 1) -> MRR 2 / 4
    assert "| 1 | long | 0.5000 | 0.5000 |" in out and "best recall@3: {'top_k': 3, 'mode': 'any'}" in out
    assert len(list((tmp_path / "charts").glob("*.png"))) == 6 and (tmp_path / "history.db").exists()
