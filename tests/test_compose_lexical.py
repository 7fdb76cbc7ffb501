"""Static check of the compose stack's lexical indexes (no Docker needed): with LEXICAL_ENGINE
tantivy (the default) the API reads the indexes the relay queue's writer writes under
<data_dir>/lexical; in separate containers only a shared named volume joins them."""

from __future__ import annotations

import re
from typing import Any

from tests.test_compose import DOCKERFILE, _environment, compose, services

__all__ = ["compose", "services"]  # the fixtures, shared with tests/test_compose.py


def test_writer_and_api_share_the_lexical_indexes(compose: dict[str, Any],
                                                 services: dict[str, Any]) -> None:
    data_dir = _environment(services["api"])["BRAINSTREAM_DATA_DIR"]
    worker = services["worker"]["command"]
    assert "relay" in worker[worker.index("--queues") + 1].split(",")
    assert _environment(services["worker"])["BRAINSTREAM_DATA_DIR"] == data_dir
    mounts = {name: {str(v).split(":")[1]: str(v).split(":")[0]
                     for v in services[name].get("volumes") or []} for name in ("worker", "api")}
    volume = mounts["worker"].get(f"{data_dir}/lexical")
    assert volume in set(compose.get("volumes") or {}), mounts
    assert mounts["api"].get(f"{data_dir}/lexical") == volume, mounts
    # the image creates the directory, so the new volume starts owned by the app's user
    assert re.search(rf"mkdir -p {re.escape(data_dir)}/lexical", DOCKERFILE.read_text())
