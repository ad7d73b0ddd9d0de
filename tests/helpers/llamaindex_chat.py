"""Chat pieces for the LlamaIndex chat-engine and agent tests, on real llama-index-core classes
and without network: an LLM that condenses follow-ups and answers from its context, the three
chat engines over the test index, and agents on LlamaIndex's ``MockFunctionCallingLLM`` that call
their query-engine or retriever tool when asked for a code."""

from __future__ import annotations

import json
import re
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.chat_engine import CondensePlusContextChatEngine, CondenseQuestionChatEngine, ContextChatEngine
from llama_index.core.llms import ChatMessage, MockFunctionCallingLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.tools import QueryEngineTool, RetrieverTool

from helpers.llamaindex_app import ANIMALS, EchoLLM, words

_CONDENSE = re.compile(r"(?:<Follow Up Message>\n|Follow Up Input: )(.*?)\n", re.S)
_FACT = re.compile(r"The secret code of the (\w+) is K\d+\.")


def condensed(history_text: str, follow_up: str) -> str:
    """The standalone question of ``follow_up``: the first user question of the history with the
    animal of the follow-up in it ("What is the secret code of the otter?" + "And the heron?" ->
    "What is the secret code of the heron?"); without an animal, the follow-up and that question."""
    first = re.search(r"user: (.*)", history_text)
    if not first:
        return follow_up
    opener = first.group(1).strip()
    animal = next((w for w in words(follow_up) if w in ANIMALS), None)
    old = next((w for w in words(opener) if w in ANIMALS), None)
    if animal and old:
        return re.sub(rf"\b{old}\b", animal, opener)
    return f"{follow_up} (re: {opener})"


class ChatLLM(EchoLLM):
    """EchoLLM that also condenses follow-ups (condense-question and condense-plus-context
    prompts) and answers chat prompts with the context fact about the animal of the last user
    message (else the one sharing most words with it). ``break_after``: a stream raises after that
    many tokens (0: never)."""

    break_after: int = 0

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        """EchoLLM's stream (instrumented), cut after ``break_after`` tokens when set."""
        inner = super().stream_complete(prompt, formatted=formatted, **kwargs)
        if not self.break_after:
            return inner

        def gen():
            for i, chunk in enumerate(inner):
                if i == self.break_after:
                    raise ConnectionError("stream cut")
                yield chunk

        return gen()

    def _answer(self, prompt: str) -> str:
        if self.fail:
            raise RuntimeError("LLM backend unavailable")
        m = _CONDENSE.search(prompt + "\n")
        if m:
            history = prompt[: m.start()]
            return condensed(history, m.group(1).strip())
        if "Query: " in prompt:
            return super()._answer(prompt)
        users = re.findall(r"^user: (.*)$", prompt, re.M)
        last = set(words(users[-1] if users else prompt))
        facts = [f.group(0) for f in _FACT.finditer(prompt)]
        if not facts:
            return "I do not know."
        return max(facts, key=lambda f: (bool(last & set(words(f)) & set(ANIMALS)), len(last & set(words(f)))))


def condense_question_engine(index: Any, **kw: Any) -> CondenseQuestionChatEngine:
    """A condense-question chat engine over ``index`` (query engine with the ChatLLM)."""
    llm = ChatLLM()
    qe = index.as_query_engine(llm=llm, similarity_top_k=kw.pop("top_k", 1))
    return CondenseQuestionChatEngine.from_defaults(qe, llm=llm, **kw)


def context_engine(index: Any, **kw: Any) -> ContextChatEngine:
    """A context chat engine over ``index``."""
    return ContextChatEngine.from_defaults(
        index.as_retriever(similarity_top_k=kw.pop("top_k", 1)),
        llm=ChatLLM(),
        memory=kw.pop("memory", None) or ChatMemoryBuffer.from_defaults(),
        **kw,
    )


def condense_plus_context_engine(index: Any, **kw: Any) -> CondensePlusContextChatEngine:
    """A condense-plus-context chat engine over ``index``."""
    return CondensePlusContextChatEngine.from_defaults(
        index.as_retriever(similarity_top_k=kw.pop("top_k", 1)), llm=ChatLLM(), **kw
    )


def agent_reply(messages: list, **kwargs: Any) -> ChatMessage:
    """The scripted agent LLM: after a tool result, answer with it; asked for a "code", call the
    ``codes`` tool with the question; otherwise answer without a tool."""
    last = messages[-1]
    if last.role == "tool":
        return ChatMessage(role="assistant", content=str(last.content).strip())
    text = last.content or ""
    if "code" in text.lower():
        return ChatMessage(
            role="assistant",
            blocks=[
                ToolCallBlock(tool_call_id=f"call-{len(messages)}", tool_name="codes", tool_kwargs={"input": text})
            ],
        )
    return ChatMessage(role="assistant", content="Hello! Ask me for the secret code of an animal.")


def agent(index: Any, tool: str = "query_engine") -> FunctionAgent:
    """A FunctionAgent with one ``codes`` tool over ``index``: a QueryEngineTool or a RetrieverTool."""
    if tool == "query_engine":
        t = QueryEngineTool.from_defaults(
            index.as_query_engine(llm=ChatLLM(), similarity_top_k=1),
            name="codes",
            description="Looks up the secret code of an animal.",
        )
    else:
        t = RetrieverTool.from_defaults(
            index.as_retriever(similarity_top_k=1),
            name="codes",
            description="Finds the passage with the secret code of an animal.",
        )
    return FunctionAgent(tools=[t], llm=MockFunctionCallingLLM(response_generator=agent_reply))


def react_reply(messages: list, **kwargs: Any) -> ChatMessage:
    """The scripted ReAct LLM: after an observation, answer with it; asked for a "code", act with
    the ``codes`` tool; otherwise answer at once."""
    last = messages[-1].content or ""
    if "Observation:" in last:
        return ChatMessage(
            role="assistant",
            content="Thought: I can answer without using any more tools.\n"
            "Answer: " + last.split("Observation:", 1)[1].strip(),
        )
    user = [m for m in messages if m.role == "user"][-1].content or ""
    if "code" in user.lower():
        return ChatMessage(
            role="assistant",
            content="Thought: I need the tool.\nAction: codes\nAction Input: " + json.dumps({"input": user}),
        )
    return ChatMessage(role="assistant", content="Thought: I can answer without using any more tools.\nAnswer: Hello!")


def react_agent(index: Any) -> ReActAgent:
    """A ReActAgent with a ``codes`` QueryEngineTool over ``index``."""
    tool = QueryEngineTool.from_defaults(
        index.as_query_engine(llm=ChatLLM(), similarity_top_k=1),
        name="codes",
        description="Looks up the secret code of an animal.",
    )
    return ReActAgent(tools=[tool], llm=MockFunctionCallingLLM(response_generator=react_reply, is_chat_model=True))
