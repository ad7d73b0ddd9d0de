"""The labeled example (issue 34, item 6): its files are what its README says, licenses included.
That it runs out of the box and prints the card the manual shows is a block of docs/deciding/trust.md,
run and compared by tests/project/test_docs.py."""

from __future__ import annotations

import json
from collections import Counter

from test_readme import ROOT

from ragmeter.labels import answer_hash, import_labels

EXAMPLE = ROOT / "examples" / "trust"


def test_the_example_holds_what_its_readme_says():
    samples = [json.loads(line) for line in (EXAMPLE / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    labels = import_labels(EXAMPLE / "labels.jsonl")
    assert len(samples) == 260 and len(labels) == 150 and not labels.errors
    sources = Counter(s["metadata"]["source"].split()[0] for s in samples)
    assert sources == {"BEGIN": 200, "SummEdits": 60}
    answers = {s["id"]: s["answer"] for s in samples}
    assert all(lb.answer_hash == answer_hash(answers[lb.sample_id]) for lb in labels)
    assert {lb.scale for lb in labels} == {"binary"} and all(lb.cluster for lb in labels)
    for name in ("LICENSE-BEGIN", "NOTICE-BEGIN-wow", "NOTICE-BEGIN-cmu-dog", "LICENSE-SummEdits"):
        assert (EXAMPLE / name).stat().st_size > 1000, name
    assert "Attribution 4.0 International" in (EXAMPLE / "LICENSE-BEGIN").read_text()
    assert "Apache License" in (EXAMPLE / "LICENSE-SummEdits").read_text()
