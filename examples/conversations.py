"""A two-turn chat in DeepEval's conversational format, loaded as one sample per retrieval turn
and scored with the offline judge; the README shows this file and its output."""

import json
import tempfile
from pathlib import Path

import ragmeter as rm

chat = {
    "name": "refunds",
    "turns": [
        {"role": "user", "content": "What if these shoes don't fit?"},
        {
            "role": "assistant",
            "content": "You get a 30-day full refund.",
            "retrieval_context": ["All customers get a 30 day full refund."],
        },
        {"role": "user", "content": "and for sale items?"},
        {
            "role": "assistant",
            "content": "Sale items get a full refund too.",
            "retrieval_context": ["Sale items are refunded as store credit."],
        },
    ],
}
path = Path(tempfile.mkdtemp()) / "chats.jsonl"
path.write_text(json.dumps(chat) + "\n")

samples = rm.load_samples(path)
for s in samples:
    print(s.id, s.turn, repr(s.question), "history:", len(s.history))
result = rm.evaluate(samples, metrics=["faithfulness"], judge="offline", progress=False)
for c in result.conversations():
    print(
        c.conversation_id,
        "turns:",
        [(t, round(v, 2)) for t, _, v in c.turns],
        "worst turn:",
        c.worst,
        "slope:",
        round(c.slope, 2),
        "falling:",
        c.falling,
    )
