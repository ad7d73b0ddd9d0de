"""Internal: The ragmeter pytest plugin (entry point ``pytest11``; or ``-p ragmeter.pytest_plugin``).

::

    @pytest.mark.ragmeter(dataset="data/rag.jsonl", judge="offline")
    def test_answers_are_grounded(ragmeter_sample):
        assert_rag(ragmeter_sample, faithfulness=0.8, context_recall=0.7)

- marker ``ragmeter(dataset=None, judge=None)``: the dataset the ``ragmeter_sample`` and
  ``ragmeter_dataset`` fixtures load (a path relative to the test file, else to the rootdir) and
  the judge :func:`ragmeter.testing.assert_rag` uses by default in that test (else
  ``--ragmeter-judge``);
- fixture ``ragmeter_sample``: one test per sample of the marker's dataset (parametrized, the
  sample id in the test id: ``test_answers_are_grounded[refund-window]``), so every failing
  sample is reported, each with its own evidence; a record that could not be loaded is one
  failing test naming its line and field, and a file with no sample one failing test naming it;
- fixture ``ragmeter_dataset``: the whole dataset as a :class:`ragmeter.Dataset` in one test
  (records that could not be loaded fail the test, naming line and field, and so does a file
  with no sample; a ``for`` loop over it stops at the first failing sample, as any loop of
  asserts does);
- a summary table at the end of the run: per metric, the assertions, their mean, the lowest
  value and how many fell below their floor;
- with ``--ragmeter-db PATH|URL`` (or ``$RAGMETER_DB``) every scored sample goes to the history
  store as one run (dataset ``pytest``) tagged ``pytest`` and ``pytest:<session id>``, each sample
  also tagged ``test:<node id>``, so a CI job's trend shows in ``ragmeter dashboard``; when the
  judge differs from the previous recorded pytest run's (its fingerprint: model, prompts,
  settings), the summary says which field changed, and the new judge's shift on the anchor set
  when both judges were checked on one (``ragmeter trust check``).

The plugin does nothing (and imports no more than this module) in a run without assertions.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

_MARKER = (
    "ragmeter(dataset=None, judge=None): the dataset the ragmeter_sample (one test per sample) and "
    "ragmeter_dataset fixtures load, and the judge assert_rag uses by default"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--ragmeter-db`` and ``--ragmeter-judge``."""
    group = parser.getgroup("ragmeter")
    group.addoption(
        "--ragmeter-db",
        metavar="PATH|URL",
        default=None,
        help="record assert_rag results in this history store (default $RAGMETER_DB)",
    )
    group.addoption(
        "--ragmeter-judge",
        metavar="SPEC",
        default=None,
        help="default judge of assert_rag (default: the ragmeter marker's, else ragmeter's default judge)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker and the session collector."""
    config.addinivalue_line("markers", _MARKER)
    config.pluginmanager.register(_Collector(config), "ragmeter-collector")


class _Collector:
    """Collects every assert_rag of the session, prints the summary, records the run."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.records: list[tuple[Any, dict[str, float], list[str], str | None]] = []
        self.session_id = (
            os.environ.get("GITHUB_RUN_ID") or f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"
        )
        self.recorded: str | None = None
        self.judge_lines: list[str] = []  # the judge's change since the previous recorded pytest run

    def _observe(self, result: Any, floors: dict[str, float], failures: list[str], test: str | None) -> None:
        self.records.append((result, floors, failures, test))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        """Around a test: assert_rag reports here and defaults to the marker's judge."""
        from ragmeter import testing

        marker = item.get_closest_marker("ragmeter")
        judge = (marker.kwargs.get("judge") if marker else None) or self.config.getoption("ragmeter_judge")
        token = testing._context.set({"judge": judge, "test": item.nodeid, "observe": self._observe})
        try:
            yield
        finally:
            testing._context.reset(token)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Record the session's samples in the history store, when one is configured."""
        db = self.config.getoption("ragmeter_db") or os.environ.get("RAGMETER_DB")
        if not db or not self.records:
            return
        import dataclasses

        from ragmeter.metrics.scoring import SampleResult
        from ragmeter.result import EvaluationResult
        from ragmeter.store import Store

        results, metrics = [], []
        for result, _floors, _, test in self.records:
            meta = dict(result.sample.metadata)
            own: list = meta["tags"] if isinstance(meta.get("tags"), list) else []
            meta["tags"] = [*own, f"test:{test}"] if test else own
            results.append(
                SampleResult(
                    dataclasses.replace(result.sample, metadata=meta), result.scores, result.usage, result.duration_s
                )
            )
            metrics += [m for m in result.scores if m not in metrics]
        judges = {s.judge for r in results for s in r.scores.values() if s.judge}
        run = EvaluationResult(
            results,
            metrics,
            judge=judges.pop() if len(judges) == 1 else "mixed",
            duration_s=sum(r.duration_s for r in results),
        )
        from ragmeter.guard import never_raise
        from ragmeter.redact import redact
        from ragmeter.store.engine import StoreError

        def failed(err: BaseException) -> None:
            self.recorded = redact(f"could not record the run in the history store: {type(err).__name__}: {err}")

        with never_raise("pytest_plugin.record_run", on_error=failed):
            try:
                with Store(db) as store:
                    previous = next(iter(store.runs(limit=1, dataset="pytest")), None)
                    run_id = store.record_run(run, dataset="pytest", tags=["pytest", f"pytest:{self.session_id}"])
                    self.recorded = f"recorded run {run_id} in {store.where} (tag pytest:{self.session_id})"
                    if previous is not None:
                        from ragmeter.trust.anchors import new_judge_lines

                        self.judge_lines = _judge_change_lines(store.run(previous.id), run, previous.id)
                        self.judge_lines += new_judge_lines(store, run_id)  # its shift on the anchors, when checked
            except StoreError as err:  # the store's own failure: its one line (store and cause), no traceback
                self.recorded = f"could not record the run in the history store: {err}"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The summary table: per metric, assertions, mean, lowest value, below floor."""
        if not self.records:
            return
        from ragmeter.report import text_table

        rows: dict[str, list] = {}
        for result, floors, failures, _ in self.records:
            for m in floors:
                row = rows.setdefault(m, [0, [], 0, 0])
                row[0] += 1
                value = result.scores[m].value
                if value is not None:
                    row[1].append(value)
                else:
                    row[3] += 1
                row[2] += m in failures
        table = [
            [m, str(n), f"{sum(v) / len(v):.4f}" if v else "-", f"{min(v):.4f}" if v else "-", str(bad), str(na)]
            for m, (n, v, bad, na) in rows.items()
        ]
        failed = sum(bool(f) for _, _, f, _ in self.records)
        tr = terminalreporter
        tr.section("ragmeter")
        tr.write_line(f"{len(self.records)} samples asserted, {failed} failed")
        tr.write_line(text_table(["metric", "asserted", "mean", "min", "below floor", "no value"], table))
        if self.recorded:
            tr.write_line(self.recorded)
        for line in self.judge_lines:
            tr.write_line(line)


def _judge_change_lines(before: Any, after: Any, before_id: int) -> list[str]:
    """What changed in the judge between the previous pytest run and this one (empty when
    nothing did): the scores of the two runs are then not comparable."""
    from ragmeter.trust.judges import describe_changes, judge_changes

    metrics = [m for m in after.metrics if m in before.metrics]
    changes, _ = judge_changes(before, after, metrics)
    return [
        f"judge changed since run {before_id}: {line} (scores are not comparable with that run's)"
        for line in describe_changes(changes)
    ]


def _dataset_path(name: Any, test_file: Any, rootpath: Any) -> Path:
    """The marker's dataset path: as given when absolute, else next to the test file when it is
    there, else under the rootdir."""
    path = Path(name)
    if not path.is_absolute():
        here = Path(str(test_file)).parent / path
        path = here if here.exists() else Path(str(rootpath)) / path
    return path


class _Unloadable:
    """A ``ragmeter_sample`` parameter that stands for what could not be loaded: the dataset file,
    or one of its records; its test fails with ``message``."""

    def __init__(self, message: str):
        self.message = message


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes ``ragmeter_sample`` runs once per sample of its marker's dataset (test
    ids: the sample ids), plus once per record that could not be loaded (a failing test that names
    it). Without a dataset on the marker it is left alone: the fixture then fails and says why."""
    if "ragmeter_sample" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("ragmeter")
    name = marker.kwargs.get("dataset") if marker else None
    if name is None:
        return
    from ragmeter.readers import load_samples

    path = _dataset_path(name, metafunc.definition.path, metafunc.config.rootpath)
    try:
        dataset = load_samples(path)
    except (OSError, ValueError) as err:
        params, ids = [_Unloadable(f"ragmeter dataset {path}: {err}")], ["dataset-not-loaded"]
    else:
        params = [*dataset, *(_Unloadable(f"{path}: {e}") for e in dataset.errors)]
        ids = [s.id or f"sample-{i}" for i, s in enumerate(dataset, 1)] + [
            f"invalid-{e.location or i}".replace(" ", "-") for i, e in enumerate(dataset.errors, 1)
        ]
        if not params:
            params, ids = [_Unloadable(f"ragmeter dataset {path} has no sample")], ["empty-dataset"]
    metafunc.parametrize("ragmeter_sample", params, ids=ids, indirect=True)


@pytest.fixture
def ragmeter_sample(request: pytest.FixtureRequest) -> Any:
    """One sample of the dataset named by the test's ``@pytest.mark.ragmeter(dataset=...)``: the
    test runs once per sample (see :func:`pytest_generate_tests`)."""
    param = getattr(request, "param", None)
    if param is None:
        pytest.fail("ragmeter_sample needs @pytest.mark.ragmeter(dataset='path/to/data.jsonl')", pytrace=False)
    if isinstance(param, _Unloadable):
        pytest.fail(param.message, pytrace=False)
    return param


@pytest.fixture
def ragmeter_dataset(request: pytest.FixtureRequest) -> Any:
    """The dataset named by the test's ``@pytest.mark.ragmeter(dataset=...)``, loaded with
    :func:`ragmeter.load_samples`; records that could not be loaded, or no sample at all, fail the
    test, naming the file. A loop of ``assert_rag`` over it stops at the first failing sample:
    take ``ragmeter_sample`` for one test per sample."""
    from ragmeter.readers import load_samples

    marker = request.node.get_closest_marker("ragmeter")
    name = marker.kwargs.get("dataset") if marker else None
    if name is None:
        pytest.fail("ragmeter_dataset needs @pytest.mark.ragmeter(dataset='path/to/data.jsonl')", pytrace=False)
    path = _dataset_path(name, request.node.fspath, request.config.rootpath)
    dataset = load_samples(path)
    if dataset.errors:
        pytest.fail(
            f"{path}: {len(dataset.errors)} records could not be loaded: " + "; ".join(map(str, dataset.errors[:5]))
        )
    if not dataset:  # a test over 0 samples asserts nothing: not a pass
        pytest.fail(f"{path}: the dataset has no samples (an empty file asserts nothing)", pytrace=False)
    return dataset
