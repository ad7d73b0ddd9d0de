"""Test-wide settings: no judge cache outside the test's temp dir, no API keys from the host."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _isolated_environment(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("RAGMETER_CACHE_DIR", str(tmp_path_factory.mktemp("ragmeter-cache")))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "RAGMETER_JUDGE", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        mp.delenv(key, raising=False)
    yield
    mp.undo()
