"""A scripted judge for tests: answers each task from a function or a fixed output, validated
against the task's schema exactly as an LLM answer would be, and counts the calls."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

from ragmeter.judges.base import Judge, JudgeError, TaskResult, Usage
from ragmeter.judges.tasks import REVIEW_PARTS, InvalidOutput, get_task


class ScriptedJudge(Judge):
    """``ScriptedJudge({"verify_claims": fn_or_dict, ...})``: ``fn(inputs) -> output``.

    Outputs go through the task's ``validate``; an invalid one raises JudgeError (like an LLM judge
    after its retries). ``calls`` counts tasks per name; ``inputs`` keeps what each task received.
    Like an LLM judge it answers ``review_context`` in one call (``combines_tasks=False``: it is
    asked the two parts apart): from a ``review_context`` script when given, else from the
    ``rate_chunks`` and ``attribute_statements`` scripts on their own inputs, as a consistent
    model would.
    """

    kind = "LLM"

    def __init__(
        self,
        script: dict[str, Any],
        name: str = "scripted",
        embedder=None,
        generates_questions: bool = True,
        combines_tasks: bool = True,
    ):
        self.script = script
        self.name = name
        self.embedder = embedder
        self.generates_questions = generates_questions
        self.combines_tasks = combines_tasks
        self.calls: Counter = Counter()
        self.inputs: dict[str, list[dict]] = {}

    async def run(self, task: str, inputs: dict) -> TaskResult:
        self.calls[task] += 1
        self.inputs.setdefault(task, []).append(copy.deepcopy(inputs))
        if task == "review_context" and task not in self.script:
            output = {}
            for part in REVIEW_PARTS:
                out = self._answer(part, inputs[part])
                output.update(out if isinstance(out, dict) else {})
        else:
            output = self._answer(task, inputs)
        try:
            output = get_task(task).validate(inputs, output)
        except InvalidOutput as err:
            raise JudgeError(f"invalid answer to {task}: {err}", task=task, attempts=1, usage=Usage(calls=1)) from None
        return TaskResult(task, output, Usage(calls=1, prompt_tokens=10, completion_tokens=5), self.name)

    def _answer(self, task: str, inputs: dict) -> Any:
        """The scripted (unvalidated) answer to ``task`` on ``inputs``."""
        if task not in self.script:
            raise JudgeError(f"scripted judge has no answer for task {task!r}", task=task, attempts=1)
        answer = self.script[task]
        return answer(inputs) if callable(answer) else copy.deepcopy(answer)
