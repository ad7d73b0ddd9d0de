"""Internal: String-overlap metrics of the answer against the reference: exact match, token F1, ROUGE-L, BLEU.

They reward wording, not truth: a correct answer phrased differently from the reference scores
low, and a wrong answer that reuses the reference's words ("The capital is not Paris") scores
high. Use them to compare with published numbers or as a cheap regression signal next to the
judged metrics (``answer_correctness``, ``faithfulness``), never instead of them.

Each metric is deterministic, needs ``answer`` and ``reference``, calls no judge, and gives a
value in [0, 1]. The formulas (``|x|`` is a length, ``&`` the multiset intersection):

- ``exact_match``: 1.0 if the SQuAD-normalised answer equals the normalised reference, else 0.0.
  Normalisation (SQuAD v1.1's ``normalize_answer``): lower case, drop punctuation, drop the
  articles a / an / the, collapse whitespace.
- ``token_f1``: SQuAD's F1 over the normalised tokens: ``P = |a & r| / |a|``, ``R = |a & r| / |r|``,
  ``F1 = 2PR / (P + R)``; 1.0 when both are empty, 0.0 when one is.
- ``rouge_l``: ROUGE-L F-measure (rouge-score's ``rougeL``, no stemming): tokens are the runs of
  letters and digits, lower-cased; ``P = LCS / |a|``, ``R = LCS / |r|``, ``F = 2PR / (P + R)``.
  Equal to rouge-score's value on ASCII text; rouge-score drops letters outside a-z, this keeps
  them (so text in other scripts is scored rather than 0).
- ``bleu``: sacreBLEU's ``sentence_bleu(answer, [reference])`` / 100: 13a tokenisation, modified
  n-gram precisions p_1..p_4 (0 when no n-gram matches at all), "exp" smoothing (the k-th n-gram order with no match counts as
  ``1 / (2^k * total_n)``), effective order (orders with no n-grams in the answer are left out),
  ``BLEU = BP * exp(mean(log p_n))`` with ``BP = exp(1 - |r| / |a|)`` when ``|a| < |r|``, else 1.

Worked example (answer "The cat sat on the mat.", reference "A cat was sitting on the mat."):
normalised tokens ``cat sat on mat`` and ``cat was sitting on mat``; 3 shared, so
``P = 3/4``, ``R = 3/5``, token F1 = 2/3; exact match 0. ROUGE-L tokens ``the cat sat on the mat``
(6) and ``a cat was sitting on the mat`` (7), LCS ``cat on the mat`` = 4, so
``F = 2 * (4/6) * (4/7) / (4/6 + 4/7) = 8/13 = 0.6154``.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter

from ragmeter.data import Sample, Score
from ragmeter.metrics.base import Metric
from ragmeter.metrics.requests import ScoringContext

__all__ = ["ExactMatch", "TokenF1", "RougeL", "Bleu", "normalize_answer", "exact_match", "token_f1", "rouge_l", "bleu"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1 normalisation: lower case, no punctuation, no articles, single spaces.

    >>> normalize_answer("The  Eiffel Tower!")
    'eiffel tower'
    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(answer: str, reference: str) -> float:
    """1.0 if the normalised texts are equal, else 0.0.

    >>> exact_match("The Eiffel Tower.", "eiffel tower")
    1.0
    """
    return float(normalize_answer(answer) == normalize_answer(reference))


def token_f1(answer: str, reference: str) -> float:
    """SQuAD token F1 of the normalised texts.

    >>> round(token_f1("The cat sat on the mat.", "A cat was sitting on the mat."), 4)
    0.6667
    """
    a, r = normalize_answer(answer).split(), normalize_answer(reference).split()
    if not a or not r:
        return float(a == r)
    same = sum((Counter(a) & Counter(r)).values())
    if same == 0:
        return 0.0
    p, rec = same / len(a), same / len(r)
    return 2 * p * rec / (p + rec)


_ROUGE_TOKEN = re.compile(r"[^\W_]+")


def _lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence, bit-parallel (Hyyrö 2004): O(|a| * |b| / word)."""
    masks: dict[str, int] = {}
    for j, tok in enumerate(b):
        masks[tok] = masks.get(tok, 0) | (1 << j)
    full = (1 << len(b)) - 1
    v = full
    for tok in a:
        u = v & masks.get(tok, 0)
        v = ((v + u) | (v - u)) & full
    return len(b) - v.bit_count()


def rouge_l(answer: str, reference: str) -> float:
    """ROUGE-L F-measure over lower-cased letter/digit tokens.

    >>> round(rouge_l("The cat sat on the mat.", "A cat was sitting on the mat."), 4)
    0.6154
    """
    a, r = _ROUGE_TOKEN.findall(answer.lower()), _ROUGE_TOKEN.findall(reference.lower())
    if not a or not r:
        return 0.0
    lcs = _lcs_length(a, r)
    if lcs == 0:
        return 0.0
    p, rec = lcs / len(a), lcs / len(r)
    return 2 * p * rec / (p + rec)


_13A = [
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),  # punctuation
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),  # period / comma unless preceded by a digit
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),  # ... unless followed by a digit
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),  # dash after a digit
]


def _tokenize_13a(line: str) -> list[str]:
    """sacreBLEU's default ``13a`` tokenizer (mteval-v13a.pl)."""
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    line = f" {line} "
    for pattern, sub in _13A:
        line = pattern.sub(sub, line)
    return line.split()


def _ngrams(tokens: list[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def bleu(answer: str, reference: str, max_order: int = 4) -> float:
    """sacreBLEU sentence BLEU (13a, exp smoothing, effective order) on a 0-1 scale.

    >>> round(bleu("The cat sat on the mat.", "The cat sat on the mat."), 4)
    1.0
    >>> round(bleu("The cat sat on the mat.", "A cat was sitting on the mat."), 4)
    0.3768
    """
    hyp, ref = _tokenize_13a(answer.rstrip()), _tokenize_13a(reference.rstrip())
    correct = [sum((_ngrams(hyp, n) & _ngrams(ref, n)).values()) for n in range(1, max_order + 1)]
    if not any(correct):
        return 0.0
    log_sum, order, smooth = 0.0, 0, 1.0
    for n in range(1, max_order + 1):
        total = max(0, len(hyp) - n + 1)
        if total == 0:
            break
        order = n
        if correct[n - 1] == 0:
            smooth *= 2
            log_sum += math.log(1.0 / (smooth * total))
        else:
            log_sum += math.log(correct[n - 1] / total)
    bp = 1.0 if len(hyp) >= len(ref) else math.exp(1 - len(ref) / len(hyp))
    return bp * math.exp(log_sum / order)


class _StringMetric(Metric):
    """Shared shape: a pure function of (answer, reference); see the module docstring's caveat."""

    uses_judge = False
    requires = ("answer", "reference")
    threshold, warn = 0.5, 0.3

    @staticmethod
    def _fn(answer: str, reference: str) -> float:
        raise NotImplementedError

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        """Apply the formula to ``sample.answer`` and ``sample.reference``."""
        # (both present: ``requires`` makes a sample without them n/a before compute)
        value = type(self)._fn(sample.answer or "", sample.reference or "")
        return Score(
            self.name,
            value,
            explanation=f"{self.name} of the answer against the reference (rewards wording, not truth)",
        )


class ExactMatch(_StringMetric):
    """Exact match after SQuAD normalisation (1 or 0). Rewards wording, not truth: a correct
    answer worded differently scores 0. Pass / warn: 1.0 / 1.0."""

    name = "exact_match"
    threshold, warn = 1.0, 1.0
    _fn = staticmethod(exact_match)


class TokenF1(_StringMetric):
    """SQuAD token F1 of answer and reference. Rewards wording, not truth: shared words count
    whether or not the answer says the same thing. Pass / warn: 0.5 / 0.3."""

    name = "token_f1"
    _fn = staticmethod(token_f1)


class RougeL(_StringMetric):
    """ROUGE-L F-measure (longest common subsequence of tokens). Rewards wording, not truth: a
    negated or reordered claim can keep a high score. Pass / warn: 0.5 / 0.3."""

    name = "rouge_l"
    _fn = staticmethod(rouge_l)


class Bleu(_StringMetric):
    """sacreBLEU sentence BLEU / 100 (n-gram precision with a brevity penalty). Rewards wording,
    not truth, and is noisy on single sentences. Pass / warn: 0.3 / 0.15."""

    name = "bleu"
    threshold, warn = 0.3, 0.15
    _fn = staticmethod(bleu)
