"""How examples/trust/ was made: human-labeled items of two redistributable development sets,
as ragmeter samples and labels (seeded; run it again to get the same files).

    python examples/trust/make_example.py --data /path/to/data   # the folder holding begin_dev/ and summedits/

- BEGIN (Dziri et al. 2022; dev split of its Wizard of Wikipedia and CMU-DoG parts; CC BY 4.0,
  see LICENSE-BEGIN-*, NOTICE-BEGIN-*): a dialogue response and the knowledge snippet it should
  be attributable to. Sample: ``question`` = the user's message ("Continue the conversation."
  when empty), ``contexts`` = [the snippet], ``answer`` = the response. Label: faithfulness 1
  for "Fully attributable", 0 for "Not fully attributable" ("Generic" responses are left out);
  cluster: the snippet (several responses share one).
- SummEdits (Laban et al. 2023; Apache-2.0, see LICENSE-SummEdits): a summary of a document,
  consistent with it or edited to be inconsistent. Sample: ``question`` = "Summarize the
  document.", ``contexts`` = [the document], ``answer`` = the summary. Label: faithfulness 1
  for consistent, 0 for inconsistent; cluster: the document.

200 BEGIN items (a seeded sample of the non-generic ones) and 60 SummEdits items (5 from each of
12 documents of at most 2,500 characters, seeded, across its domains) make ``samples.jsonl``; ``labels.jsonl`` holds the
human labels of a seeded random 150 of them (PPI++ needs the labeled items to be a uniform
random sample: the card then corrects the judge's mean over all 260 with them), each with the
hash of the answer it was given on.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from ragmeter.labels import answer_hash

HERE = Path(__file__).resolve().parent
SEED = 34


def _begin(folder: Path, rng: random.Random, n: int) -> list[tuple[dict, int, str]]:
    items = [json.loads(line) for line in (folder / "begin_dev.jsonl").read_text(encoding="utf-8").splitlines()]
    items = [it for it in items if it["begin_label"] != "Generic"]
    out = []
    for it in rng.sample(items, n):
        record = {
            "id": it["id"],
            "question": it["message"].strip() or "Continue the conversation.",
            "contexts": [it["knowledge"]],
            "answer": it["response"],
            "metadata": {"source": f"BEGIN {it['data_source']}"},
        }
        out.append(
            (record, int(it["begin_label"] == "Fully attributable"), "snippet-" + answer_hash(it["knowledge"])[:10])
        )
    return out


def _summedits(folder: Path, rng: random.Random, docs: int, per_doc: int) -> list[tuple[dict, int, str]]:
    documents = {
        d["doc_id"]: d for d in map(json.loads, (folder / "docs.jsonl").read_text(encoding="utf-8").splitlines())
    }
    items = [json.loads(line) for line in (folder / "items.jsonl").read_text(encoding="utf-8").splitlines()]
    by_doc: dict[str, list[dict]] = {}
    for it in items:
        by_doc.setdefault(it["doc_id"], []).append(it)
    domains = sorted({documents[d]["domain"] for d in by_doc})
    chosen: list[str] = []
    for i in range(docs):  # round robin over the domains, a seeded document from each
        pool = sorted(
            d
            for d in by_doc
            if documents[d]["domain"] == domains[i % len(domains)]
            and d not in chosen
            and len(by_doc[d]) >= per_doc
            and len(documents[d]["doc"]) <= 2500
        )
        chosen.append(rng.choice(pool))
    out = []
    for doc_id in chosen:
        for it in rng.sample(sorted(by_doc[doc_id], key=lambda x: x["id"]), per_doc):
            record = {
                "id": it["id"],
                "question": "Summarize the document.",
                "contexts": [documents[doc_id]["doc"]],
                "answer": it["summary"],
                "metadata": {"source": f"SummEdits {it['domain']}"},
            }
            out.append((record, int(it["label"]), f"doc-{doc_id}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, type=Path, help="the folder holding begin_dev/ and summedits/")
    args = ap.parse_args()
    rng = random.Random(SEED)
    rows = _begin(args.data / "begin_dev", rng, 200) + _summedits(args.data / "summedits", rng, 12, 5)
    (HERE / "samples.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r, _, _ in rows), encoding="utf-8"
    )
    labeled = sorted(rng.sample(range(len(rows)), 150))
    labels = [
        {
            "sample_id": rows[i][0]["id"],
            "answer_hash": answer_hash(rows[i][0]["answer"]),
            "metric": "faithfulness",
            "value": rows[i][1],
            "scale": "binary",
            "annotator": rows[i][0]["metadata"]["source"].split()[0],
            "cluster": rows[i][2],
        }
        for i in labeled
    ]
    (HERE / "labels.jsonl").write_text("".join(json.dumps(lb) + "\n" for lb in labels), encoding="utf-8")
    print(f"wrote {len(rows)} samples and {len(labels)} labels to {HERE}")


if __name__ == "__main__":
    main()
