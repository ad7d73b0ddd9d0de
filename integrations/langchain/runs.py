"""Internal: LangChain run trees -> :class:`ragmeter.Sample` (the translation, nothing else).

:func:`sample_from_run` turns one finished root run, as the handler's run tracker
(:mod:`~ragmeter.integrations.langchain.tracker`) hands it over, into a Sample: the question
(root input), every retriever run under the root in chain order (steps as they ran,
``RunnableParallel`` branches as declared; Document ids, metadata and any score kept in
metadata), the final answer (root output), and what the run cost (latency, token usage, models)
in ``metadata``. Run metadata, document metadata and error texts are redacted of credentials
(:mod:`ragmeter.redact`).

Chat turns (history, turn, standalone question, conversation id; LangGraph message-state graphs;
turns without retrieval): :mod:`~ragmeter.integrations.langchain.turns`.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
from typing import Any

from ragmeter.capture import REFERENCE_KEY, RELEVANT_KEY, SAMPLE_ID_KEY
from ragmeter.conversations import NO_RETRIEVAL_KEY
from ragmeter.data import MAX_HISTORY, Context, RecordError, Sample
from ragmeter.fileio import json_safe
from ragmeter.integrations._tracing import trace_metadata
from ragmeter.integrations.langchain.turns import chat_history, content_text, turn_fields
from ragmeter.redact import redact, redact_value

__all__ = ["sample_from_run", "has_open_runs", "QUESTION_KEYS", "ANSWER_KEYS", "SCORE_KEYS", "ID_KEYS"]

log = logging.getLogger("ragmeter")

#: Root input keys tried (in order) for the question when ``question_key`` is not given.
QUESTION_KEYS = ("question", "input", "query", "user_input", "q")
#: Root output keys tried (in order) for the answer when ``answer_key`` is not given.
ANSWER_KEYS = ("answer", "output", "result", "response", "text", "content", "generation")
#: Document metadata keys read as the retriever's score (first numeric one wins).
SCORE_KEYS = ("score", "relevance_score", "similarity_score", "similarity", "_score")
#: Document metadata keys read as the chunk id when ``Document.id`` is empty.
ID_KEYS = ("id", "doc_id", "chunk_id")
# ``config["metadata"]`` keys that carry ground truth and the sample id: REFERENCE_KEY,
# RELEVANT_KEY, SAMPLE_ID_KEY (from ragmeter.capture, shared with LlamaIndex's instrument_tags).

_PARTIAL_ERRORS = ("GeneratorExit", "CancelledError")
_LLM_TYPES = ("llm", "chat_model")


def sample_from_run(
    root: Any,
    target: Any,
    question_key: str | None = None,
    answer_key: str | None = None,
    max_history: int = MAX_HISTORY,
) -> tuple[Sample | None, str]:
    """One finished root run as a Sample, or ``(None, reason)`` when it is not a RAG run
    (``"skipped_no_retriever"``: no retriever ran; ``"skipped_no_question"``: no question
    found). ``target`` is the span active when the run started (its ids go to
    ``metadata["trace"]``); ``question_key`` / ``answer_key`` name the root input / output key
    holding the question / answer (default: try :data:`QUESTION_KEYS` / :data:`ANSWER_KEYS`);
    a chat turn keeps the last ``max_history`` messages of its history."""
    tree = _Tree(root)
    error = root.error
    status, reason = "ok", None
    if error:
        head = _error_head(error)
        if head.startswith(_PARTIAL_ERRORS):
            status, reason = "partial", head
        else:
            status, reason = "error", head
    elif tree.unfinished:
        status, reason = "partial", f"{tree.unfinished} run(s) still open when the root ended"
    history = chat_history(root)
    no_retrieval = not tree.retrievers and status == "ok"
    if no_retrieval and (history is None or root.run_type != "chain"):
        return None, "skipped_no_retriever"

    question = _question(root.inputs, question_key)
    if not question:
        question = next((q for q in (_str((r.inputs or {}).get("query")) for r in tree.retrievers) if q), None)
    if not question:
        return None, "skipped_no_question"

    contexts, retrievers = _contexts(tree.retrievers)
    answer = partial_answer = None
    if status == "ok":
        answer = _answer(root.outputs, answer_key)
        if answer is None and tree.llms:  # e.g. the chain returns a structure without text
            answer = _llm_text(tree.llms[-1])
    elif status == "partial":  # what was streamed so far is kept aside, never scored as the answer
        partial_answer = _answer(root.outputs, answer_key)
        if partial_answer is None and tree.llms:
            partial_answer = _streamed_text(tree.llms[-1])

    run_meta = (root.extra or {}).get("metadata") or {}
    reference = run_meta.get(REFERENCE_KEY)
    relevant = run_meta.get(RELEVANT_KEY)
    sample_id = run_meta.get(SAMPLE_ID_KEY)
    metadata: dict[str, Any] = {
        "source": "langchain",
        "status": status,
        "run_id": str(root.id),
        "run_name": root.name,
        "started_at": _iso(root.start_time),
        "latency": tree.latency(),
        "retrievers": retrievers,
    }
    if no_retrieval:
        metadata[NO_RETRIEVAL_KEY] = True
    if reason:
        metadata["error" if status == "error" else "partial_reason"] = redact(reason)
    if partial_answer:
        metadata["partial_answer"] = partial_answer
    usage = tree.token_usage()
    if usage:
        metadata["token_usage"] = usage
    if tree.all_llms:
        metadata["llm_calls"] = len(tree.all_llms)
        models = tree.models()
        if models:
            metadata["models"] = models
    if target is not None:
        metadata["trace"] = trace_metadata(target)
    if root.tags:
        metadata["tags"] = json_safe(list(root.tags))
    extra = {k: v for k, v in run_meta.items() if k not in (REFERENCE_KEY, RELEVANT_KEY, SAMPLE_ID_KEY)}
    if extra:  # the application's own keys: kept, without credentials
        metadata["run_metadata"] = redact_value(json_safe(extra))

    fields: dict[str, Any] = {
        "reference": reference if reference is None or isinstance(reference, str) else str(reference),
        "relevant_ids": relevant,
    }
    turn = turn_fields(tree.retrievers, question, run_meta, history, max_history)
    try:
        sample = Sample(
            question, contexts, answer=answer, id=_sample_id(sample_id, root.id), metadata=metadata, **fields, **turn
        )
    except RecordError as err:  # bad ground truth in config metadata: keep the run, drop the field
        log.warning("ragmeter: ignoring config metadata for run %s: %s", root.id, redact(str(err)))
        metadata["capture_warning"] = redact(str(err))
        sample = Sample(question, contexts, answer=answer, id=_sample_id(sample_id, root.id), metadata=metadata, **turn)
    return sample, "captured"


# ---------------------------------------------------------------------- the run tree


def has_open_runs(root: Any) -> bool:
    """Whether a run below ``root`` has not ended (an abandoned stream): those runs may still
    change after the root ended, so such a tree is read at once rather than later."""
    stack = list(root.child_runs or ())
    while stack:
        run = stack.pop()
        if run.end_time is None:
            return True
        stack.extend(run.child_runs or ())
    return False


class _Tree:
    """The retriever and LLM runs of one root run tree, and what they cost."""

    def __init__(self, root: Any):
        self.root = root
        self.retrievers: list[Any] = []  # outermost retriever runs (nested ones are their parts)
        self.llms: list[Any] = []  # LLM runs outside retrievers (the app's generation)
        self.all_llms: list[Any] = []  # every LLM run (a query-rewriting retriever's too)
        self.unfinished = 0
        path: dict[Any, tuple] = {root.id: ()}  # run id -> its _step_key at each level from the root
        stack = [(root, False)]
        while stack:
            run, inside_retriever = stack.pop()
            if run is not root and run.end_time is None:
                self.unfinished += 1
            kind = run.run_type
            if kind == "retriever" and not inside_retriever:
                self.retrievers.append(run)
            elif kind in _LLM_TYPES:
                self.all_llms.append(run)
                if not inside_retriever:
                    self.llms.append(run)
            nested = inside_retriever or kind == "retriever"
            children = list(run.child_runs or ())
            branches = list(run.outputs) if isinstance(run.outputs, dict) else []
            for child in children:
                path[child.id] = path[run.id] + (_step_key(child, branches),)
            stack.extend((child, nested) for child in children)
        for runs in (self.retrievers, self.llms, self.all_llms):
            runs.sort(key=lambda r: path[r.id])

    def latency(self) -> dict[str, float]:
        root = self.root
        end = root.end_time
        out: dict[str, float] = {}
        if end is not None:
            out["total_s"] = _round((end - root.start_time).total_seconds())
        out["retrieval_s"] = _round(_union(self.retrievers, end))
        out["generation_s"] = _round(_union(self.llms, end))
        if self.llms:
            first = next((e.get("time") for e in self.llms[-1].events or () if e.get("name") == "new_token"), None)
            if first is not None:
                out["first_token_s"] = _round((first - root.start_time).total_seconds())
        return out

    def token_usage(self) -> dict[str, int] | None:
        prompt = completion = total = 0
        found = False
        for run in self.all_llms:
            usage = _run_usage(run.outputs or {})
            if usage is None:
                continue
            found = True
            prompt += usage[0]
            completion += usage[1]
            total += usage[2]
        if not found:
            return None
        return {"prompt": prompt, "completion": completion, "total": total}

    def models(self) -> list[str]:
        names: list[str] = []
        for run in self.all_llms:
            extra = run.extra or {}
            meta = extra.get("metadata") or {}
            params = extra.get("invocation_params") or {}
            name = meta.get("ls_model_name") or params.get("model_name") or params.get("model")
            if isinstance(name, str) and name and name not in names:
                names.append(name)
        return names


def _step_key(run: Any, branches: list[str]) -> tuple:
    """Where a run sits among its siblings: a RunnableParallel branch (tag ``map:key:K``) by K's
    position in the parallel's output, which is the order the chain declares its branches; any
    other run by start time. Branches run on threads, so their start order changes run to run;
    the declared order does not, and it is the order a ``d["a"] + d["b"]`` prompt sees them."""
    branch = len(branches)
    for tag in run.tags or ():
        if tag.startswith("map:key:") and tag[8:] in branches:
            branch = branches.index(tag[8:])
            break
    return (branch, run.start_time, getattr(run, "dotted_order", None) or "")


def _union(runs: list[Any], fallback_end: Any) -> float:
    """Wall-clock seconds covered by the runs' intervals (parallel runs are not double counted)."""
    spans = sorted((r.start_time, r.end_time or fallback_end) for r in runs if r.start_time is not None)
    total = 0.0
    cur_start = cur_end = None
    for start, end in spans:
        if end is None:
            continue
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += (cur_end - cur_start).total_seconds()
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    if cur_end is not None:
        total += (cur_end - cur_start).total_seconds()
    return total


def _run_usage(outputs: dict) -> tuple[int, int, int] | None:
    """(prompt, completion, total) tokens of one LLM run: the messages' ``usage_metadata``, else
    ``llm_output["token_usage"]`` / ``["usage"]``; None when the model reported nothing."""
    found = False
    p = c = t = 0
    for gens in outputs.get("generations") or ():
        for gen in gens or ():
            msg = gen.get("message") if isinstance(gen, dict) else getattr(gen, "message", None)
            if isinstance(msg, dict):
                um = (msg.get("kwargs") or {}).get("usage_metadata")
            else:
                um = getattr(msg, "usage_metadata", None)
            if isinstance(um, dict) and um:
                found = True
                ip, op = _int(um.get("input_tokens")), _int(um.get("output_tokens"))
                p, c = p + ip, c + op
                t += _int(um.get("total_tokens")) or ip + op
    if found:
        return p, c, t
    llm_output = outputs.get("llm_output")
    usage = None
    if isinstance(llm_output, dict):
        usage = llm_output.get("token_usage") or llm_output.get("usage")
    if isinstance(usage, dict) and usage:
        ip = _int(usage.get("prompt_tokens", usage.get("input_tokens")))
        op = _int(usage.get("completion_tokens", usage.get("output_tokens")))
        return ip, op, _int(usage.get("total_tokens")) or ip + op
    return None


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0
    return int(value)


def _contexts(retrievers: list[Any]) -> tuple[list[Context], list[dict]]:
    contexts: list[Context] = []
    seen: set[tuple] = set()
    info: list[dict] = []
    for run in retrievers:
        docs = (run.outputs or {}).get("documents") or []
        entry: dict[str, Any] = {
            "name": run.name,
            "query": _str((run.inputs or {}).get("query")),
            "documents": len(docs),
        }
        if run.start_time is not None and run.end_time is not None:
            entry["latency_s"] = _round((run.end_time - run.start_time).total_seconds())
        if run.error:
            entry["error"] = redact(_error_head(run.error))
        info.append(entry)
        for doc in docs:
            ctx = _context(doc)
            if ctx is None:
                continue
            key = (ctx.id, ctx.text)
            if key in seen:  # the same chunk from two retrievers: the model saw it once
                continue
            seen.add(key)
            contexts.append(ctx)
    return contexts, info


def _context(doc: Any) -> Context | None:
    if isinstance(doc, dict):
        text, meta, doc_id = doc.get("page_content"), doc.get("metadata"), doc.get("id")
    else:
        text, meta, doc_id = (
            getattr(doc, "page_content", None),
            getattr(doc, "metadata", None),
            getattr(doc, "id", None),
        )
    if not isinstance(text, str):
        return None
    meta = meta if isinstance(meta, dict) else {}
    if doc_id is None or doc_id == "":
        doc_id = next((meta[k] for k in ID_KEYS if meta.get(k) not in (None, "")), None)
    if doc_id is not None and not isinstance(doc_id, str):
        doc_id = str(doc_id)
    score = None
    for key in SCORE_KEYS:
        value = meta.get(key)
        if isinstance(value, bool):
            continue
        try:
            value = float(value) if value is not None else None
        except (TypeError, ValueError):
            continue
        if value is not None and math.isfinite(value):
            score = value
            break
    return Context(text=text, id=doc_id, score=score, metadata=redact_value(json_safe(meta)))


def _question(inputs: Any, key: str | None) -> str | None:
    if not isinstance(inputs, dict):
        return _str(_text(inputs))
    if key is not None:
        return _str(_text(inputs.get(key)))
    if len(inputs) == 1:
        found = _str(_text(next(iter(inputs.values()))))
        if found:
            return found
    for k in QUESTION_KEYS:
        if k in inputs:
            found = _str(_text(inputs[k]))
            if found:
                return found
    return None


def _answer(outputs: Any, key: str | None, depth: int = 0) -> str | None:
    if not isinstance(outputs, dict):
        return _str(_text(outputs))
    if key is not None and key in outputs:
        value = outputs[key]
    elif len(outputs) == 1:
        value = next(iter(outputs.values()))
    else:
        value = next((outputs[k] for k in ANSWER_KEYS if k in outputs and outputs[k] is not None), None)
    if isinstance(value, dict) and depth < 2:
        return _answer(value, key, depth + 1)
    if isinstance(value, (list, tuple)):  # a message list (a LangGraph state): the last AI message with text
        ai = [t for t in (content_text(m.content) for m in value if getattr(m, "type", None) == "ai") if _str(t)]
        if ai:
            return _str(ai[-1])
    return _str(_text(value))


def _text(value: Any) -> str | None:
    """Text of a string, a message (its content), or a list of messages (the last human one)."""
    if value is None or isinstance(value, str):
        return value
    content = getattr(value, "content", None)
    if content is not None and hasattr(value, "type"):  # a BaseMessage
        return content_text(content)
    if isinstance(value, (list, tuple)) and value:
        humans = [m for m in value if getattr(m, "type", None) == "human"]
        if humans:
            return content_text(humans[-1].content)
        if hasattr(value[-1], "content"):
            return content_text(value[-1].content)
        return None
    if hasattr(value, "to_messages"):  # a PromptValue
        try:
            return _text(value.to_messages())
        except Exception:
            return None
    return None


def _llm_text(run: Any) -> str | None:
    """The text of an LLM run's last generation (chat message content or completion text)."""
    gens = (run.outputs or {}).get("generations") or []
    for batch in reversed(gens):
        for gen in reversed(batch or []):
            text = gen.get("text") if isinstance(gen, dict) else getattr(gen, "text", None)
            if isinstance(text, str) and text.strip():
                return text
    return _streamed_text(run)


def _streamed_text(run: Any) -> str | None:
    """What an LLM run streamed before it was abandoned (its ``new_token`` events)."""
    parts = []
    for event in run.events or ():
        if event.get("name") != "new_token":
            continue
        kwargs = event.get("kwargs") or {}
        chunk = kwargs.get("chunk")
        text = getattr(chunk, "text", None) if chunk is not None else None
        if not isinstance(text, str):
            token = kwargs.get("token")
            text = token if isinstance(token, str) else content_text(token)
        if isinstance(text, str):
            parts.append(text)
    return _str("".join(parts))


def _str(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _error_head(error: str) -> str:
    """``"ValueError('boom')"`` from LangChain's ``repr(error) + traceback`` string."""
    head = error.split("Traceback (most recent call last)", 1)[0].strip()
    if not head and error.strip():
        head = error.strip().splitlines()[0]
    return head[:500]


def _sample_id(given: Any, run_id: Any) -> str:
    if isinstance(given, str) and given:
        return given
    if isinstance(given, int) and not isinstance(given, bool):
        return str(given)
    return str(run_id)


def _iso(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, _dt.datetime) else None


def _round(value: float) -> float:
    return round(value, 6)
