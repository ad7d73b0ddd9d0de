"""Test-wide settings: no judge cache outside the test's temp dir, no API keys from the host."""

import pytest

#: The shared fixtures, one copy each: ``llm_server`` (OpenAI and Anthropic wire protocols on
#: 127.0.0.1), ``browser`` (headless Chromium, one per module), ``postgres_server`` / ``make_db`` /
#: ``db_url`` (a real PostgreSQL; ``db_url`` runs a test on SQLite and on PostgreSQL), and pytest's
#: ``pytester``. Room-specific ones live in the room's conftest.py (integrations/llamaindex).
pytest_plugins = ["helpers.servers", "helpers.browser", "helpers.postgres", "pytester"]


@pytest.fixture(autouse=True, scope="session")
def _isolated_environment(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("RAGMETER_CACHE_DIR", str(tmp_path_factory.mktemp("ragmeter-cache")))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "RAGMETER_JUDGE", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        mp.delenv(key, raising=False)
    yield
    mp.undo()


def pytest_collection_modifyitems(config, items):
    """Tests marked ``heavy`` (PyTorch, ONNX Runtime, tokenizers, Ray: the ``dev`` extra, not the
    light ``test`` one) run only when ``-m`` names the marker (``python -m pytest -m heavy``, as
    .ci/run does in a step of its own); every other run leaves them out, ``-m "not slow"`` too."""
    if "heavy" in (config.getoption("markexpr") or ""):
        return
    heavy = [item for item in items if item.get_closest_marker("heavy")]
    if heavy:
        config.hook.pytest_deselected(items=heavy)
        items[:] = [item for item in items if not item.get_closest_marker("heavy")]
