"""A parameter sweep recorded in a history store: a small keyword retriever over six chunks,
swept over top_k and the retrieval mode, scored with retrieval metrics (no judge, no key). It
prints the table, writes one PNG chart per metric and parameter, and records every setting so
``ragmeter dashboard`` shows the sweep. The README shows this file and its output.

    python examples/sweep_dashboard.py [OUT_DIR]
    ragmeter dashboard --db OUT_DIR/history.db -o OUT_DIR/dashboard.html

Without OUT_DIR it writes into a new temporary folder (never into the current one) and says which.
"""

import sys
import tempfile
from pathlib import Path

import ragmeter as rm

CHUNKS = {
    "eiffel-1": "The Eiffel Tower was built from 1887 to 1889 for the World's Fair.",
    "eiffel-2": "The tower is 330 metres tall and stands on the Champ de Mars in Paris.",
    "louvre-1": "The Louvre in Paris is the world's most-visited museum.",
    "louvre-2": "The Mona Lisa has hung in the Louvre since 1797.",
    "rome-1": "The Colosseum in Rome was completed in 80 AD under Emperor Titus.",
    "rome-2": "Rome is the capital of Italy.",
}
QUESTIONS = [
    rm.Sample("When was the Eiffel Tower built?", relevant_ids=["eiffel-1"]),
    rm.Sample("How tall is the Eiffel Tower in Paris?", relevant_ids=["eiffel-2"]),
    rm.Sample("Where is the Mona Lisa?", relevant_ids=["louvre-2", "louvre-1"]),
    rm.Sample("When was the Colosseum in Rome completed?", relevant_ids=["rome-1"]),
]


def build(top_k, mode):
    """A pipeline: rank chunks by shared words ("any": one point per word, "long": words of 5+ letters only)."""

    def words(text):
        return {w.strip(".,?'").lower() for w in text.split() if mode == "any" or len(w) >= 5}

    def pipeline(question):
        ranked = sorted(CHUNKS, key=lambda c: -len(words(question) & words(CHUNKS[c])))
        return "", [{"id": c, "text": CHUNKS[c]} for c in ranked[:top_k]]

    return pipeline


out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="ragmeter-sweep-"))
table = rm.sweep(
    build,
    {"top_k": [1, 2, 3], "mode": ["any", "long"]},
    QUESTIONS,
    metrics=["recall@3", "mrr"],
    progress=False,
    store=out / "history.db",
)
print(table.to_markdown())
print("best recall@3:", {k: table.best("recall@3")[k] for k in ("top_k", "mode")})
print("wrote", len(table.save_charts(out / "charts", format="png")), "PNG charts to", out / "charts")
print("recorded the sweep in", out / "history.db")
