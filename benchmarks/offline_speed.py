"""How fast is the offline judge? 1,000 synthetic RAG samples x 5 chunks.

Each sample has a question, five retrieved chunks of 6-9 sentences (~100 words, every chunk
different: company names, people, places, years, amounts and percentages are drawn at random)
and a 2-4 sentence answer mixing supported, paraphrased, altered and invented facts. We time the
judge tasks exactly as the metrics call them, caches cleared first:

- faithfulness: ``extract_claims`` on the answer's sentences, then ``verify_claims`` against the
  five chunks;
- context relevance: ``rate_chunks`` on the question and the chunks split into statements.

Run::

    python benchmarks/offline_speed.py                 # lexical and embedding paths
    OPENBLAS_NUM_THREADS=1 taskset -c 0 python benchmarks/offline_speed.py   # one core
    python benchmarks/offline_speed.py --paths lexical --samples 200
    python benchmarks/offline_speed.py --max-record     # the largest record the default Limits allow

Results of this version (issue 35: one core, ``taskset -c 0``, ``OPENBLAS_NUM_THREADS=1`` for the
embedding path; wall time on a 2-core machine shared with other jobs, load 2.6-3.5; the previous
version, ea26972, run alternately in the same minutes)::

    | task                               | this version                  | before (ea26972) |
    |------------------------------------|------------------------------:|-----------------:|
    | faithfulness, lexical              | 115-192 samples/s (3 runs)    | 80-93/s          |
    | faithfulness, embedding            | 68/s (1,000), 73/s (200)      | 47/s (200)       |
    | context relevance, embedding       | 17/s (1,000), 25/s (200)      | 5/s (200)        |

On the same machine idle (load under 1, 2026-11-28, 2 runs): faithfulness, lexical 4.30-4.38 s
(229-232/s); context relevance, lexical 0.99-1.00 s (~1,000/s).

Instructions per lexical faithfulness sample (valgrind's callgrind, 40 samples, the run minus the
imports): 31M, against 55.5M before. Context relevance on the embedding path embeds the question
and, per chunk, the statement holding most of the question's words (and, for a chunk holding
little of a reference, the reference and its statement holding most of its words): 5,954 distinct
texts for 1,000 samples, 27 per sample before. The numbers of earlier rounds follow.

Before issue 35 (2 CPUs, 16 samples in flight; the embedding model's one-off load is not timed)::

    | path      | faithfulness (extract + verify) | claims | context relevance (rate_chunks) |
    |-----------|--------------------------------:|-------:|--------------------------------:|
    | lexical   |                          7.40 s |   3764 |                          1.37 s |
    | embedding |                         21.59 s |   3764 |                        139.19 s |

Context relevance on the embedding path was bound by the model: it embedded every statement
whose similarity could change the verdict (~25 per sample, ~90% of the time in the forward pass);
a static-vector prefilter and ONNX Runtime's int8 kernels were measured and not adopted (at most
~2x and 1.4x; ``benchmarks/JUDGE_RESULTS.md`` and the README before issue 35).

The largest record (``--max-record``): every field at its default
:class:`~ragmeter.metrics.requests.Limits`: question 20,000 characters, four chunks of 100,000
(400,000 in all), a reference of ~190 statements (``max_claims`` is the limit it meets first), and
the answer either at its 100,000 characters (~1,400 distinct claims: past ``max_claims``, so the
five claim metrics refuse it and the other seven score it) or at ~190 distinct claims (every
metric scores it). All 12 metrics, caches cleared, question and chunks at a quarter, half and all
of their limits (results of this version, 2 CPUs shared with other jobs); first, the time to
refuse a record whose answer is 10 MB, 100 times its limit (the tests check that refusal by size
and count: no judge task sees a text past the limit, the big record costs no task)::

    a 10 MB answer (over the limit) refused in 0.12 s   (2026-11-28, load ~11 on 2 CPUs)

    | path      | answer       | chunks x0.25 | chunks x0.5 | chunks x1 |
    |-----------|--------------|-------------:|------------:|----------:|
    | lexical   | long answer  |       1.43 s |      1.93 s |    3.40 s |
    | lexical   | most claims  |       1.21 s |      2.11 s |    3.56 s |
    | embedding | long answer  |      13.62 s |     20.65 s |   33.07 s |
    | embedding | most claims  |      14.68 s |     22.67 s |   26.83 s |

The time grows linearly with the chunks (the work is claims x chunk sentences, and the claims
are capped). Before the limits and the fixes that came with them, the lexical path grew with the
square of the text: the same two records at x1 took 38.8 s (long answer: its ~1,400 claims all
checked) and 6.8 s (most claims), a 300,000-character answer against a 300,000-character chunk
28.5 s, and a 10 MB answer had not finished after 5 minutes. The embedding path's time is mostly
the model encoding every sentence of every chunk (context relevance).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time

COMPANIES = [
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Vandelay",
    "Stark",
    "Wayne",
    "Tyrell",
    "Cyberdyne",
    "Soylent",
    "Wonka",
    "Gringotts",
    "Oscorp",
    "Aperture",
    "Black Mesa",
    "Massive Dynamic",
    "Pied Piper",
]
SUFFIXES = ["Industries", "Corp", "Labs", "Holdings", "Systems", "Group", "Partners", "Energy"]
PEOPLE = [
    "Maria Lopez",
    "John Smith",
    "Aiko Tanaka",
    "Omar Haddad",
    "Ingrid Berg",
    "Ravi Patel",
    "Chen Wei",
    "Lucia Rossi",
    "Kwame Mensah",
    "Sofia Novak",
    "Daniel Cohen",
    "Fatima Zahra",
    "Liam Murphy",
]
PLACES = ["Berlin", "Toronto", "Nairobi", "Osaka", "Lyon", "Austin", "Melbourne", "Bogota", "Oslo", "Pune"]
PRODUCTS = [
    "battery",
    "vaccine",
    "search engine",
    "cloud platform",
    "electric truck",
    "payment app",
    "chip",
    "satellite",
    "wind turbine",
    "language model",
    "drone",
    "smart meter",
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
VERBS_UP = ["rose", "increased", "grew", "climbed", "jumped"]
VERBS_DOWN = ["fell", "decreased", "declined", "dropped", "slipped"]
FILLER = [
    "Analysts said the results were broadly in line with expectations.",
    "The company did not comment on the report.",
    "Shares traded flat in early trading on the news.",
    "The board is expected to review the plan at its next meeting.",
    "Critics argued that the timeline was too ambitious.",
    "Independent experts have not yet verified the figures.",
    "The announcement came after months of speculation.",
    "Regulators are still reviewing the application.",
]


def _fact(rng: random.Random) -> dict:
    company = f"{rng.choice(COMPANIES)} {rng.choice(SUFFIXES)}"
    return {
        "company": company,
        "person": rng.choice(PEOPLE),
        "place": rng.choice(PLACES),
        "product": rng.choice(PRODUCTS),
        "year": rng.randint(1995, 2024),
        "month": rng.choice(MONTHS),
        "day": rng.randint(1, 28),
        "amount": round(rng.uniform(1, 900), 1),
        "pct": rng.randint(2, 60),
        "staff": rng.randint(20, 9000),
        "up": rng.random() < 0.6,
    }


def _chunk(f: dict, rng: random.Random) -> str:
    trend = rng.choice(VERBS_UP if f["up"] else VERBS_DOWN)
    sentences = [
        f"{f['company']} was founded in {f['place']} in {f['year']} by {f['person']}.",
        f"On {f['month']} {f['day']}, {f['year'] + rng.randint(1, 5)}, the company launched a new {f['product']}.",
        f"Revenue {trend} {f['pct']}% to ${f['amount']} million last year.",
        f"The firm employs about {f['staff']:,} people and plans to open an office in {rng.choice(PLACES)}.",
        f"{f['person'].split()[0]} said the {f['product']} would reach customers in {rng.choice(MONTHS)}.",
        f"In {f['year'] + rng.randint(1, 8)}, {f['company']} opened a research centre in {rng.choice(PLACES)} with "
        f"{rng.randint(20, 400)} engineers, and its chief financial officer, {rng.choice(PEOPLE)}, said margins "
        f"had improved for the third consecutive quarter.",
        f"According to the annual report, operating costs {rng.choice(VERBS_UP + VERBS_DOWN)} "
        f"{rng.randint(1, 30)} percent, mainly because of higher spending on research and marketing.",
        f"The {f['product']} received approval from regulators in {rng.choice(PLACES)} on "
        f"{rng.choice(MONTHS)} {rng.randint(1, 28)}, after a review that lasted almost {rng.randint(2, 18)} months.",
        *rng.sample(FILLER, 2),
    ]
    rng.shuffle(sentences)
    return " ".join(sentences[: rng.randint(6, 9)])


def _answer(f: dict, rng: random.Random) -> str:
    parts = []
    kind = rng.random()
    year = f["year"] if kind < 0.6 else f["year"] + rng.choice([-3, -1, 2])
    parts.append(f"{f['company']} was started by {f['person']} in {year} in {f['place']}.")
    if rng.random() < 0.7:
        word = rng.choice(["increased", "grew"] if f["up"] else ["decreased", "fell"])
        if rng.random() < 0.2:
            word = "decreased" if f["up"] else "increased"
        parts.append(
            f"Its revenue {word} by {f['pct'] if rng.random() < 0.8 else f['pct'] + 5} percent to "
            f"${f['amount']} million, and it has roughly {f['staff']:,} employees."
        )
    if rng.random() < 0.5:
        parts.append(f"The company also makes a {f['product']} and is not planning any layoffs.")
    if rng.random() < 0.3:
        parts.append(f"It was acquired by {rng.choice(COMPANIES)} for $2 billion.")
    return " ".join(parts)


def make_samples(n: int, seed: int = 7) -> list[dict]:
    """``n`` synthetic samples: question, 5 chunks (the first about the asked company), answer."""
    rng = random.Random(seed)
    samples = []
    for i in range(n):
        facts = [_fact(rng) for _ in range(5)]
        target = facts[0]
        chunks = [_chunk(target, rng)] + [_chunk(f, rng) for f in facts[1:]]
        rng.shuffle(chunks)
        question = f"When and by whom was {target['company']} founded, and how did its revenue change? (#{i})"
        samples.append({"question": question, "contexts": chunks, "answer": _answer(target, rng)})
    return samples


async def _gather(fn, samples: list[dict], concurrency: int) -> list:
    sem = asyncio.Semaphore(concurrency)

    async def one(s: dict):
        async with sem:
            return await fn(s)

    return await asyncio.gather(*(one(s) for s in samples))


async def _faithfulness(judge, samples: list[dict], concurrency: int = 16) -> int:
    """extract_claims + verify_claims for every sample (``concurrency`` samples in flight, as the
    runner schedules them); returns the number of claims."""
    from ragmeter.text import split_sentences

    async def one(s: dict) -> int:
        claims = (
            await judge.run("extract_claims", {"question": s["question"], "units": split_sentences(s["answer"])})
        ).output["claims"]
        if claims:
            await judge.run("verify_claims", {"claims": [c["text"] for c in claims], "chunks": s["contexts"]})
        return len(claims)

    return sum(await _gather(one, samples, concurrency))


async def _relevance(judge, samples: list[dict], concurrency: int = 16) -> None:
    """rate_chunks for every sample (context relevance)."""
    from ragmeter.text import split_statements

    async def one(s: dict) -> None:
        await judge.run(
            "rate_chunks",
            {"question": s["question"], "reference": None, "chunks": [split_statements(c) for c in s["contexts"]]},
        )

    await _gather(one, samples, concurrency)


def _clear_caches() -> None:
    from ragmeter import specifics, specifics_extraction
    from ragmeter.judges.local import LocalEmbedder
    from ragmeter.judges.offline import checks, text

    for fn in (
        text.analyse,
        text.analyse_chunk,
        text._sentence,
        text.normalise,
        checks._stated,
        specifics_extraction._extract_cached,
        specifics_extraction._numeric_cached,
        specifics._norm_text,
        specifics._capitalised_words,
    ):
        fn.cache_clear()
    LocalEmbedder._cache.clear()


def _text(n_chars: int, piece, rng: random.Random) -> str:
    """Pieces (``piece(fact, rng)``) about ever new random facts joined up to ``n_chars``."""
    parts, size = [], 0
    while size < n_chars:
        parts.append(piece(_fact(rng), rng))
        size += len(parts[-1]) + 1
    return " ".join(parts)[:n_chars].rsplit(" ", 1)[0]


def max_record(context_scale: float = 1.0, most_claims: bool = False, seed: int = 11):
    """A record at the default limits: question and chunks at ``context_scale`` times theirs,
    the reference just under ``max_claims`` statements (the limit it meets first), the answer at
    its character limit or (``most_claims``) just under ``max_claims`` distinct claims."""
    from ragmeter.data import Sample
    from ragmeter.judges.offline.claims import extract_claims
    from ragmeter.metrics.requests import Limits, distinct_claims
    from ragmeter.text import split_sentences

    lim, rng = Limits(), random.Random(seed)
    n_chunks = lim.max_context_chars // lim.max_chunk_chars
    chunks = [_text(int(context_scale * lim.max_chunk_chars), _chunk, rng) for _ in range(n_chunks)]
    question = _text(
        int(context_scale * lim.max_question_chars), lambda f, r: f"How did {f['company']} do in {f['year']}?", rng
    )

    def grown(count, wanted: int) -> str:
        text = ""
        while count(text) < wanted:
            text = (text + " " + _answer(_fact(rng), rng)).strip()
        return text

    reference = grown(lambda t: len(split_sentences(t)), lim.max_claims - 10)
    if most_claims:
        answer = grown(lambda t: len(distinct_claims(extract_claims(split_sentences(t)))), lim.max_claims - 10)
    else:
        answer = _text(lim.max_answer_chars, _answer, rng)
    return Sample(question=question, contexts=chunks, answer=answer, reference=reference, id="max")


def _over_limit(judge) -> float:
    """Seconds to refuse a record with a 10 MB answer (100x ``max_answer_chars``): every text
    metric's score a LimitError, the retrieval metrics scored (tests check this by size and count)."""
    import ragmeter as rm

    record = max_record(0.25)
    record.answer, record.id = (record.answer + " ") * (10_000_000 // (len(record.answer) + 1) + 1), "big"
    t0 = time.perf_counter()
    result = rm.evaluate([record], judge=judge, progress=False)
    elapsed = time.perf_counter() - t0
    assert {s.error.split(":")[0] for s in result[0].scores.values() if s.error} == {"LimitError"}
    return elapsed


def _max_record_table(paths: list[str]) -> None:
    import ragmeter as rm
    from ragmeter.judges.offline import OfflineJudge

    print(f"a 10 MB answer (over the limit) refused in {_over_limit(OfflineJudge(embeddings=False)):.2f} s")
    scales = (0.25, 0.5, 1.0)
    print("| path      | answer       | " + " | ".join(f"chunks x{s:<4g}" for s in scales) + " |")
    print("|-----------|--------------|" + "|".join("-------------:" for _ in scales) + "|")
    for path in paths:
        judge = OfflineJudge(embeddings=(path == "embedding"))
        if path == "embedding":
            judge.embedder.encode(["warm up"])
        for most_claims in (False, True):
            times = []
            for scale in scales:
                record = max_record(scale, most_claims)
                _clear_caches()
                t0 = time.perf_counter()
                result = rm.evaluate([record], metrics=list(rm.metrics.REGISTRY), judge=judge, progress=False)
                times.append(time.perf_counter() - t0)
                errors = {s.error.split(":")[0] for s in result[0].scores.values() if s.error}
                assert errors <= {"LimitError"}, errors
            label = "most claims" if most_claims else "long answer"
            print(f"| {path:9s} | {label:12s} | " + " | ".join(f"{t:10.2f} s" for t in times) + " |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--paths", default="lexical,embedding")
    parser.add_argument("--concurrency", type=int, default=16, help="samples in flight (as the runner does)")
    parser.add_argument("--tasks", default="faithfulness,relevance", help="which timings to run")
    parser.add_argument("--max-record", action="store_true", help="time the largest record the default Limits allow")
    args = parser.parse_args(argv)
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    tasks = {t.strip() for t in args.tasks.split(",") if t.strip()}
    if args.max_record:
        _max_record_table(paths)
        return 0

    from ragmeter.judges.offline import OfflineJudge

    samples = make_samples(args.samples)
    words = sum(len(c.split()) for s in samples for c in s["contexts"]) / (5 * len(samples))
    print(
        f"{len(samples)} samples x 5 chunks (mean {words:.0f} words per chunk), CPUs: {os.cpu_count()}, "
        f"{args.concurrency} samples in flight"
    )
    print()
    from ragmeter.judges.local import LocalEmbedder

    print("| path      | faithfulness (extract + verify) | claims | context relevance (rate_chunks) | texts embedded |")
    print("|-----------|--------------------------------:|-------:|--------------------------------:|---------------:|")
    n = len(samples)
    for path in paths:
        judge = OfflineJudge(embeddings=(path == "embedding"))
        if path == "embedding":
            judge.embedder.encode(["warm up"])  # the one-off model load (a few seconds) is not timed
        faith, rel, n_claims, n_texts = "-", "-", "-", "-"
        if "faithfulness" in tasks:
            _clear_caches()
            t0 = time.perf_counter()
            n_claims = asyncio.run(_faithfulness(judge, samples, args.concurrency))
            t = time.perf_counter() - t0
            faith = f"{t:.2f} s ({n / t:,.0f}/s)"
        if "relevance" in tasks:
            _clear_caches()
            t0 = time.perf_counter()
            asyncio.run(_relevance(judge, samples, args.concurrency))
            t = time.perf_counter() - t0
            rel = f"{t:.2f} s ({n / t:,.0f}/s)"
            n_texts = len(LocalEmbedder._cache) if path == "embedding" else "-"
        print(f"| {path:9s} | {faith:>31} | {n_claims:>6} | {rel:>31} | {n_texts:>14} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
