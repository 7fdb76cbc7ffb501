"""Every example of client/README.md runs against the real API (but the publishing one: it
needs `POST /v1/events`, test_client_publish.py runs it)."""

from __future__ import annotations

import pytest

from tests.client.conftest import LiveApi
from tests.client.readme import PUBLISHING, blocks, run_block

pytestmark = pytest.mark.stack

EXAMPLES = [code for code in blocks() if PUBLISHING not in code]


def test_the_readme_has_its_examples() -> None:
    assert len(EXAMPLES) >= 8 and len(blocks()) == len(EXAMPLES) + 1


@pytest.mark.parametrize("code", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_readme_example_runs(code: str, live_api: LiveApi,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    printed = run_block(code, live_api.url, live_api.tenants["a"].key, monkeypatch)
    assert printed.strip(), "an example that prints nothing shows nothing"
