"""Internal: The OpenTelemetry GenAI semantic-convention names ragmeter writes, kept in this one module.

ragmeter reports each score as the GenAI **evaluation event** (``gen_ai.evaluation.result``):
as a span event on its evaluation carrier span (:mod:`ragmeter.tracing.writer`) and, when asked,
as a log record through the OpenTelemetry Logs API (:mod:`ragmeter.tracing.events`). The event
and attribute names follow the GenAI semantic conventions' event registry
(``model/gen-ai/events.yaml`` of ``open-telemetry/semantic-conventions-genai``):

* event ``gen_ai.evaluation.result``, parented to the evaluated span;
* ``gen_ai.evaluation.name`` (required), ``gen_ai.evaluation.score.value`` and
  ``gen_ai.evaluation.score.label`` (conditionally required), ``gen_ai.evaluation.explanation``
  (recommended), ``error.type`` (the GenAI error group: set when the evaluation failed);
* the judge that scored, under the evaluator-identity names proposed for the conventions
  (``gen_ai.evaluation.evaluator.{id,name,version}``, still a draft).

Those conventions are in *Development* status, so names may change. When they do, the names
ragmeter emits change the way the GenAI conventions ask instrumentations to migrate: the
default keeps the names below (:data:`BASELINE`), and ``OTEL_SEMCONV_STABILITY_OPT_IN``
(a comma-separated list) containing ``gen_ai_latest_experimental`` switches to the newest set
ragmeter knows (:data:`LATEST`). Today both are the same set; a change adds a new
:class:`EvaluationNames` as :data:`LATEST` here and nowhere else.

>>> evaluation_names({"OTEL_SEMCONV_STABILITY_OPT_IN": "http,gen_ai_latest_experimental"}).event
'gen_ai.evaluation.result'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "EvaluationNames",
    "BASELINE",
    "LATEST",
    "OPT_IN_ENV",
    "GEN_AI_LATEST",
    "LEGACY_EVENT_NAME",
    "evaluation_names",
]

#: The environment variable of the OpenTelemetry semantic-convention migration plan.
OPT_IN_ENV = "OTEL_SEMCONV_STABILITY_OPT_IN"
#: The token in :data:`OPT_IN_ENV` that selects the newest GenAI names.
GEN_AI_LATEST = "gen_ai_latest_experimental"


@dataclass(frozen=True)
class EvaluationNames:
    """The names of the GenAI evaluation event and its attributes."""

    event: str = "gen_ai.evaluation.result"
    name: str = "gen_ai.evaluation.name"
    score_value: str = "gen_ai.evaluation.score.value"
    score_label: str = "gen_ai.evaluation.score.label"
    explanation: str = "gen_ai.evaluation.explanation"
    error_type: str = "error.type"
    #: The evaluator's identity, as proposed for the GenAI conventions (a draft:
    #: open-telemetry/semantic-conventions-genai#359): the judge's fingerprint id, name, version.
    evaluator_id: str = "gen_ai.evaluation.evaluator.id"
    evaluator_name: str = "gen_ai.evaluation.evaluator.name"
    evaluator_version: str = "gen_ai.evaluation.evaluator.version"


#: Where a log record carried its event name before the Logs API had an ``event_name`` field
#: (the event conventions up to semantic conventions 1.26; used only with such an old SDK).
LEGACY_EVENT_NAME = "event.name"

#: The names written by default (the GenAI conventions' event registry as of 2026).
BASELINE = EvaluationNames()
#: The names written with ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``.
LATEST = BASELINE


def evaluation_names(environ: Mapping[str, str] | None = None) -> EvaluationNames:
    """:data:`LATEST` when ``OTEL_SEMCONV_STABILITY_OPT_IN`` (in ``environ``, default
    ``os.environ``) lists ``gen_ai_latest_experimental``, else :data:`BASELINE`."""
    raw = (os.environ if environ is None else environ).get(OPT_IN_ENV, "")
    tokens = {t.strip().lower() for t in raw.split(",")}
    return LATEST if GEN_AI_LATEST in tokens else BASELINE
