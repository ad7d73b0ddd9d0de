"""What people rate on the labeling page: the criteria, each with its question and a 1-5 guide, and
the judge metric each is compared with."""

from __future__ import annotations

from typing import Any

__all__ = ["CRITERIA", "CRITERION_METRICS"]

#: The criteria people rate on a 1-5 scale: what each asks, and anchors for 1, 3 and 5.
CRITERIA: dict[str, dict[str, Any]] = {
    "faithfulness": {
        "question": "Is every claim in the answer supported by the chunks?",
        "anchors": {"1": "mostly unsupported or contradicted by the chunks",
                    "3": "the main point is supported, some details are not",
                    "5": "every claim is supported by the chunks"}},
    "relevance": {
        "question": "Does the answer address the question that was asked?",
        "anchors": {"1": "off-topic or answers another question",
                    "3": "partly addresses it, or buries the answer in unrelated text",
                    "5": "directly and only answers the question"}},
    "completeness": {
        "question": "Does the answer cover everything the question needs?",
        "anchors": {"1": "misses the essential part",
                    "3": "covers the main part, misses secondary parts",
                    "5": "nothing needed is missing"}},
    "citation_correctness": {
        "question": "Do the citations point to the chunks that support each cited statement?",
        "anchors": {"1": "citations missing or pointing to unrelated chunks",
                    "3": "some citations are right, some wrong or missing",
                    "5": "every citation points to a supporting chunk"}},
    "overall": {
        "question": "Would you accept this answer for a user?",
        "anchors": {"1": "unacceptable: wrong or harmful",
                    "3": "acceptable with reservations",
                    "5": "good as it is"}},
}

#: The judge metric each criterion is compared with (``overall``: the composite score).
CRITERION_METRICS = {"faithfulness": "faithfulness", "relevance": "answer_relevancy",
                     "completeness": "response_completeness", "citation_correctness": "citation_accuracy",
                     "overall": "composite"}
