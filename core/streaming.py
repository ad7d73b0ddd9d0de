"""Internal: Runs larger than memory: samples streamed in, results streamed out, resumable by sample id.

``rm.evaluate("big.jsonl", out="results.jsonl", resume=True)`` (CLI: ``ragmeter evaluate
big.jsonl --out results.jsonl --resume``) reads a ``.jsonl`` input one line at a time, hands the
samples to the executor as it frees a slot (:mod:`ragmeter.executors`), and appends each
:class:`~ragmeter.metrics.scoring.SampleResult` to ``out`` as it finishes, then drops it: memory holds the
samples in flight (the concurrency), not the dataset, plus one id per sample (to reject duplicate
ids and skip the ones already scored). With ``resume=True`` the samples whose id is already in
``out`` are skipped, so a re-run of an interrupted job scores only the rest; a line cut off by
the interruption is dropped and its sample scored again.

``out`` is a results file like ``evaluate --out x.jsonl`` writes (``ragmeter report`` and
``compare`` read it): a header line, then one line per sample, in the order they finished. The
header is written first and rewritten at the end (through a copy, atomically) with the invalid
records and the run's duration (summed over resumed runs). Other inputs (``.json``, ``.csv``, a
list) are loaded as usual and only the results are streamed. A ``run_key`` in the header links
the file to the store run that ``evaluate --db`` records as it goes (see :func:`run_key_of`).
"""

from __future__ import annotations

import itertools
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ragmeter.data import RecordError, Sample, samples_of
from ragmeter.executors import AsyncioExecutor, Executor, default_concurrency
from ragmeter.fileio import JSON_ERRORS, decode_text, json_problem, json_text, parse_json
from ragmeter.judges.base import Embedder, Judge
from ragmeter.judges.fingerprint import CODE_FINGERPRINT, fingerprints_of
from ragmeter.judges.spec import resolve_judge
from ragmeter.metrics import resolve_metrics
from ragmeter.metrics.requests import Limits
from ragmeter.metrics.scoring import SampleResult, sample_scorer
from ragmeter.readers import as_dataset
from ragmeter.result import EvaluationResult, _stats
from ragmeter.verdicts import RESPONSE_TIME, RESPONSE_TIME_LEVELS, add_response_time

__all__ = ["stream_evaluate", "iter_samples", "ResultsFile", "StreamedResult", "run_key_of", "set_run_key"]

_JSONL = (".jsonl", ".ndjson")


def iter_samples(source: Any, errors: list[RecordError]) -> Iterator[Sample]:
    """The samples of ``source``: a ``.jsonl`` file read one line at a time (the records of a line
    as :func:`ragmeter.load_samples` reads them), anything else loaded as
    :func:`ragmeter.evaluate` loads it. Bad records and duplicate ids go to ``errors``."""
    if not (isinstance(source, (str, os.PathLike)) and Path(source).suffix.lower() in _JSONL):
        dataset = as_dataset(source)
        errors.extend(dataset.errors)
        yield from dataset
        return
    seen: dict[str | None, int] = {}  # Sample.id: typed optional, set by Sample itself
    with open(source, "rb") as fh:
        for n, raw in enumerate(fh, start=1):
            line = decode_text(raw)
            if not line.strip():
                continue
            where = f"line {n}"
            try:
                try:
                    record = parse_json(line)
                except JSON_ERRORS as exc:
                    raise RecordError(where, None, json_problem(exc)) from None
                for sample in samples_of(record, where):
                    if sample.id in seen:
                        raise RecordError(where, "id", f"duplicate id {sample.id!r} (first at line {seen[sample.id]})")
                    seen[sample.id] = n
                    yield sample
            except RecordError as err:
                errors.append(err if err.location else err.at(where))


def run_key_of(path: str | os.PathLike) -> str | None:
    """The ``run_key`` in the header of the results file ``path``; None when the file is missing,
    empty, not a results file or has none."""
    try:
        with open(path, "rb") as fh:
            header = parse_json(decode_text(fh.readline()))
    except (OSError, *JSON_ERRORS):
        return None
    key = header.get("run_key") if isinstance(header, dict) and header.get("ragmeter") == "results" else None
    return key if isinstance(key, str) and key else None


class ResultsFile:
    """The sample results of a results ``.jsonl`` file, read a line at a time on each iteration."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def _lines(self) -> Iterator[tuple[int, str]]:
        with open(self.path, "rb") as fh:
            next(fh, None)  # the header
            for n, raw in enumerate(fh, start=2):
                if raw.strip():
                    yield n, decode_text(raw)

    def __iter__(self) -> Iterator[SampleResult]:
        for n, line in self._lines():
            try:
                yield SampleResult.from_dict(parse_json(line))
            except (*JSON_ERRORS, KeyError, TypeError) as exc:
                raise ValueError(f"{self.path}: line {n}: {exc}") from None

    def __len__(self) -> int:
        return sum(1 for _ in self._lines())

    def __getitem__(self, i: int) -> SampleResult:
        if i < 0:
            i += len(self)
        for r in itertools.islice(self, i, None):
            return r
        raise IndexError(i)


class StreamedResult(EvaluationResult):
    """The result of a streamed run: an :class:`~ragmeter.result.EvaluationResult` whose samples
    stay in the results file ``path`` (read back one at a time when iterated; ``summary()`` keeps
    only the values). ``scored``: samples scored by this run; ``skipped``: samples already in the
    file when it resumed. ``save(path)`` to the results file itself writes nothing; other reports
    (.html, .md, ...) are built in memory from the file."""

    def __init__(
        self,
        path: str | os.PathLike,
        metrics: list[str],
        judge: str,
        invalid: list[RecordError],
        duration_s: float,
        thresholds: dict[str, tuple[float, float]],
        scored: int = 0,
        skipped: int = 0,
    ):
        super().__init__([], metrics, judge=judge, invalid=invalid, duration_s=duration_s, thresholds=thresholds)
        self.path = Path(path)
        self.results = ResultsFile(path)  # type: ignore[assignment]
        self.scored, self.skipped = scored, skipped

    def summary(self, labels: Any = None) -> dict[str, dict[str, Any]]:
        """As :meth:`EvaluationResult.summary`, in one pass over the file, holding values only
        (``labels``: the human-unit estimates too, which read the file again)."""
        values: dict[str, list[float]] = {m: [] for m in self.metrics}
        counts = {m: dict.fromkeys(("errors", "n/a", "pass", "warn", "fail"), 0) for m in self.metrics}
        for r in self.results:
            for m in self.metrics:
                s = r.scores.get(m)
                if s is None:
                    continue
                if s.value is not None:
                    values[m].append(s.value)
                for key, hit in (
                    ("errors", s.status == "error"),
                    ("n/a", s.status == "n/a"),
                    ("pass", s.label == "pass"),
                    ("warn", s.label == "warn"),
                    ("fail", s.label == "fail"),
                ):
                    counts[m][key] += hit
        out = {m: {**_stats(values[m]), "count": len(values[m]), **counts[m]} for m in self.metrics}
        if labels is not None:
            self._add_human_estimates(out, labels)
        return out

    def save(self, path: str | os.PathLike) -> Path:
        """Write a report (see :meth:`EvaluationResult.save`); the results file itself is already written."""
        if Path(path).resolve() == self.path.resolve():
            return self.path
        return super().save(path)

    def load(self) -> EvaluationResult:  # type: ignore[override]  # public API: no path, the run's own file
        """The whole run in memory (:meth:`EvaluationResult.load` of the results file)."""
        return EvaluationResult.load(self.path)


class _Sink:
    """Appends results to a results ``.jsonl`` file; on resume, first reads the ids it holds."""

    def __init__(self, path: str | os.PathLike, header: dict, resume: bool):
        self.path = Path(path)
        self.done: set[str] = set()
        self.previous_s = 0.0
        self.timed = False  # a previous run added response_time scores
        if resume and self.path.exists() and self.path.stat().st_size:
            old = self._scan(header)
            if header.get("run_key") and old.get("run_key") != header["run_key"]:
                _rewrite_header(self.path, {**old, "run_key": header["run_key"]})  # linked to its store run at once
        else:
            self.path.write_text(json_text(header) + "\n", encoding="utf-8")
        self._fh = open(self.path, "a", encoding="utf-8", errors="backslashreplace", newline="")
        self.written = 0

    def _scan(self, header: dict) -> dict:
        """Read the ids already scored; check the file belongs to the same kind of run; drop a last
        line cut off by an interruption. Returns the file's header."""
        keep = 0
        with open(self.path, "rb") as fh:
            first = fh.readline()
            try:
                old = parse_json(decode_text(first))
            except JSON_ERRORS:
                old = None
            if not isinstance(old, dict) or old.get("ragmeter") != "results" or not first.endswith(b"\n"):
                raise ValueError(f"{self.path}: not a ragmeter results file; cannot resume from it")
            before = [m for m in old.get("metrics") or [] if m != RESPONSE_TIME]
            if before != header["metrics"] or old.get("judge") != header["judge"]:
                raise ValueError(
                    f"{self.path}: written by a run of judge {old.get('judge')!r} with metrics {before}; "
                    f"this run has judge {header['judge']!r} with metrics {header['metrics']}: "
                    "resume with the same ones, or write another file"
                )
            self.previous_s = float(old.get("duration_s") or 0.0)
            self.timed = RESPONSE_TIME in (old.get("metrics") or [])
            keep = fh.tell()
            for n, raw in enumerate(fh, start=2):
                if not raw.endswith(b"\n"):
                    break  # cut off mid-write: scored again
                keep += len(raw)
                if not raw.strip():
                    continue
                try:
                    self.done.add(str(parse_json(decode_text(raw))["sample"]["id"]))
                except (*JSON_ERRORS, KeyError, TypeError) as exc:
                    raise ValueError(
                        f"{self.path}: line {n} is not a sample result ({exc}); cannot resume from it"
                    ) from None
        if keep < self.path.stat().st_size:
            os.truncate(self.path, keep)
        return old

    def write(self, result: SampleResult) -> None:
        """Append one result (flushed at once, so an interruption loses at most the line being written)."""
        self._fh.write(json_text(result.to_dict()) + "\n")
        self._fh.flush()
        self.written += 1

    def close(self, header: dict) -> None:
        """Close the file and rewrite its header line (through a copy renamed over it)."""
        self._fh.close()
        _rewrite_header(self.path, header)


def _rewrite_header(path: Path, header: dict) -> None:
    """Replace the first line of ``path`` with ``header`` (through a copy renamed over it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(path, "rb") as src, open(tmp, "wb") as dst:
            src.readline()
            dst.write((json_text(header) + "\n").encode("utf-8", "backslashreplace"))
            shutil.copyfileobj(src, dst, 1 << 16)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def set_run_key(path: str | os.PathLike, key: str) -> None:
    """Write ``run_key`` into the header of the results file ``path`` (see :func:`run_key_of`)."""
    with open(path, "rb") as fh:
        header = parse_json(decode_text(fh.readline()))
    if not isinstance(header, dict) or header.get("ragmeter") != "results":
        raise ValueError(f"{path}: not a ragmeter results file")
    _rewrite_header(Path(path), {**header, "run_key": key})


async def stream_evaluate(
    samples: Any,
    metrics: Iterable[Any] | None = None,
    judge: Judge | str | None = None,
    *,
    out: str | os.PathLike | None,
    resume: bool = False,
    embedder: Embedder | None = None,
    concurrency: int | None = None,
    progress: bool = True,
    executor: Executor | None = None,
    limits: Limits | None = None,
    response_time: tuple[float, float] | None = RESPONSE_TIME_LEVELS,
    profile: Any = None,
    recorder: Any = None,
    repeats: int = 1,
    repeat_band: float | None = None,
    capture_content: bool = True,
) -> StreamedResult:
    """Score ``samples`` streaming the results into ``out`` (a ``.jsonl`` results file); see the
    module docstring. Arguments as :func:`ragmeter.aevaluate`; with ``metrics=None`` the
    retrieval metrics are added when the first sample carries ``relevant_ids``. A sample without
    a captured latency gets no ``response_time`` score here (there is no whole dataset to look at).
    The ``recorder``'s ``key`` (see :func:`ragmeter.aevaluate`), when it has one, goes into the file's
    header as ``run_key`` (a resumed file without it gets it at once)."""
    if out is None:
        raise ValueError("resume=True needs out=...: the results .jsonl to write and resume from")
    if Path(out).suffix.lower() not in _JSONL:
        raise ValueError(f"out={str(out)!r}: a streamed run writes a .jsonl results file")
    errors: list[RecordError] = []
    stream = iter_samples(samples, errors)
    first = next(stream, None)
    metric_list = resolve_metrics(metrics, [first] if first is not None else [])
    if profile is not None:
        from ragmeter.profiles import get_profile

        profile = get_profile(profile)
        metric_list = profile.metrics(metric_list)
    judge_obj = resolve_judge(judge, metric_list)
    names = [m.name for m in metric_list]
    thresholds = {m.name: (m.threshold, m.warn) for m in metric_list}
    header = {
        "ragmeter": "results",
        "judge": getattr(judge_obj, "name", None) or "code",
        "metrics": names,
        "thresholds": {k: list(v) for k, v in thresholds.items()},
        "invalid_records": [],
        "duration_s": 0.0,
        **({"profile": profile.name} if profile is not None else {}),
        "judges": fingerprints_of([judge_obj.fingerprint.id if judge_obj is not None else None, CODE_FINGERPRINT.id]),
    }
    if getattr(recorder, "key", None):
        header["run_key"] = recorder.key
    sink = _Sink(out, header, resume)  # first: it refuses a file of another run before the store is touched
    if recorder is not None:
        try:
            recorder.start(
                {
                    "judge": header["judge"],
                    "metrics": list(names),
                    "thresholds": dict(thresholds),
                    "profile": header.get("profile"),
                }
            )
        except BaseException:
            sink._fh.close()  # the file as it was (its header already names the run key)
            raise
    skipped = 0

    def todo() -> Iterator[Sample]:
        nonlocal skipped
        for s in itertools.chain([first] if first is not None else [], stream):
            if s.id in sink.done:
                skipped += 1
                continue
            yield s

    executor = executor or AsyncioExecutor(concurrency or default_concurrency(judge_obj))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(desc="ragmeter", unit="sample", disable=None)
    timed = sink.timed

    def done(_: int, result: SampleResult) -> None:
        nonlocal timed
        if response_time is not None and add_response_time([result], *response_time):
            timed = True
        sink.write(result)
        if recorder is not None:
            recorder.add(result)
        if bar is not None:
            bar.update(1)

    start = time.perf_counter()
    try:
        await executor.map(
            sample_scorer(metric_list, judge_obj, embedder, limits, repeats, repeat_band, capture_content), todo(), done
        )
    finally:
        if bar is not None:
            bar.close()
        if timed:
            names.append(RESPONSE_TIME)
            thresholds[RESPONSE_TIME] = (1.0, 0.5)  # as the runner sets them
        duration = sink.previous_s + time.perf_counter() - start
        sink.close(
            {
                **header,
                "metrics": names,
                "thresholds": {k: list(v) for k, v in thresholds.items()},
                "invalid_records": [e.to_dict() for e in errors],
                "duration_s": round(duration, 3),
            }
        )
    result = StreamedResult(
        out, names, header["judge"], errors, duration, thresholds, scored=sink.written, skipped=skipped
    )
    result.profile = profile.name if profile is not None else None
    return result
