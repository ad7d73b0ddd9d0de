"""Custom metrics: two Criteria defined in words, a FunctionMetric and a Metric subclass, scored
with the offline judge (which answers n/a for criteria written in words). The README shows this
file and its output."""

import ragmeter as rm
from ragmeter.metrics import Criteria, FunctionMetric, Metric

# A metric defined in words: any LLM judge scores it 1-5 with a reason; value = (s - 1) / 4.
polite = Criteria(
    "polite",
    criteria="The answer is courteous and does not blame the user.",
    rubric={1: "rude or blaming", 3: "neutral", 5: "warm and courteous"},
)
sourced = Criteria(
    "sourced", criteria="Every figure in the answer appears in the contexts.", inputs=["answer", "contexts"]
)

# Deterministic metrics: a plain function, or a Metric subclass.
short = FunctionMetric("short", lambda s: 1.0 if len(s.answer.split()) <= 30 else 0.0)


class AnswerLength(Metric):
    name, requires, uses_judge = "answer_length", ("answer",), False

    async def compute(self, sample, ctx):
        words = len(sample.answer.split())
        return rm.Score(self.name, min(1.0, 10 / words), explanation=f"{words} words (limit 10)")


sample = rm.Sample(
    "When was the Eiffel Tower built?",
    ["The Eiffel Tower was built from 1887 to 1889."],
    answer="It was built from 1887 to 1889, over about two years [1].",
)
result = rm.evaluate([sample], metrics=[polite, sourced, short, AnswerLength()], judge="offline", progress=False)
for name, score in result[0].scores.items():
    value = "-" if score.value is None else f"{score.value:.2f}"
    print(f"{name:14} {score.status:5} {value:5} {score.explanation}")
