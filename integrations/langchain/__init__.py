"""LangChain: capture every RAG run of a chain and score it inline or offline.

Add one object to an existing chain and change nothing else::

    from ragmeter.integrations.langchain import RagmeterCallbackHandler

    handler = RagmeterCallbackHandler(metrics=["faithfulness", "answer_relevancy"], judge="offline")
    chain.invoke("Who wrote Dune?", config={"callbacks": [handler]})
    handler.flush()                      # wait for pending scoring
    handler.results.summary()            # an EvaluationResult view of what was scored

or capture every run without passing callbacks (LangChain's configure hook)::

    from ragmeter.integrations import langchain as rml

    handler = rml.instrument(metrics=["faithfulness"], judge="offline")
    chain.invoke("Who wrote Dune?")
    rml.uninstrument()

Each root run becomes one :class:`ragmeter.Sample`; a LangGraph graph invocation too (one per
chat turn of a message-state graph, the ``thread_id`` as conversation id). The package only
translates LangChain events (LangChain is imported here and nowhere else; LangGraph never):
:mod:`~ragmeter.integrations.langchain.runs` turns a run tree into a Sample,
:mod:`~ragmeter.integrations.langchain.turns` reads its chat turn,
:mod:`~ragmeter.integrations.langchain.handler` is the callback handler,
:mod:`~ragmeter.integrations.langchain.hook` installs it through the configure hook.
"""

from ragmeter._extras import needs_extra

with needs_extra("ragmeter.integrations.langchain", "langchain", "langchain_core"):
    from ragmeter.integrations.langchain.handler import RagmeterCallbackHandler
    from ragmeter.integrations.langchain.hook import instrument, uninstrument
    from ragmeter.integrations.langchain.runs import ANSWER_KEYS, ID_KEYS, QUESTION_KEYS, SCORE_KEYS

__all__ = [
    "RagmeterCallbackHandler",
    "instrument",
    "uninstrument",
    "QUESTION_KEYS",
    "ANSWER_KEYS",
    "SCORE_KEYS",
    "ID_KEYS",
]
