"""The labeled example runs out of the box (issue 34, item 6): ``ragmeter evaluate`` on
examples/trust/samples.jsonl with the offline judge, then ``ragmeter trust`` with its labels,
prints what the README shows; the example's files are what its README says, licenses included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ragmeter.labels import answer_hash, import_labels
from test_readme import ROOT, shown_output

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


@pytest.mark.slow
def test_the_readme_shows_what_ragmeter_trust_prints_on_the_example(tmp_path):
    env = {**os.environ, "RAGMETER_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "120"}
    for key in ("RAGMETER_JUDGE", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):  # the offline judge, as in the README
        env.pop(key, None)
    results = tmp_path / "results.jsonl"
    out = subprocess.run([sys.executable, "-m", "ragmeter.cli", "evaluate", "examples/trust/samples.jsonl", "-m",
                          "faithfulness", "--out", str(results), "--no-progress"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    card = subprocess.run([sys.executable, "-m", "ragmeter.cli", "trust", str(results), "--labels",
                           "examples/trust/labels.jsonl", "--out", str(tmp_path / "card.html")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert card.returncode == 0, card.stderr
    shown = shown_output("ragmeter trust results.jsonl --labels examples/trust/labels.jsonl")
    assert card.stdout == shown + f"wrote {tmp_path / 'card.html'}\n"
    assert Path(tmp_path / "card.html").read_text().count('class="trust-metric"') == 1
