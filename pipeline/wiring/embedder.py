"""The read side's query embedder: loaded and warmed up at start-up and, when that fails (the
embedding server is down, the model cannot load yet), loaded again in the background with the
one retry policy's capped, jittered back-off until it succeeds. Until then the dense channel is
unavailable and search answers `lexical_only`; afterwards it is hybrid again, without a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from pipeline.domain.errors import ConfigError
from pipeline.domain.retry import retry_until_done
from pipeline.embedding.embedders import build_embedder
from pipeline.ports import Embedder
from pipeline.settings import Settings

log = logging.getLogger(__name__)

# The cap of the back-off between the API's tries to load a query embedder that failed (an
# embedding server still starting): search answers lexical-only meanwhile, and is hybrid again
# at most this many seconds after the server answers.
EMBEDDER_RETRY_MAX_WAIT = 30.0


class QueryEmbedderLoader:
    """Holds the query embedder once it has loaded (`current`, None before)."""

    def __init__(self, settings: Settings,
                 build: Callable[[Settings], Embedder] = build_embedder) -> None:
        self.settings = settings
        self.build = build  # build_embedder, or build_name_embedder for /v1/resolve
        self.current: Embedder | None = None
        self._retrying: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Load now; on failure keep loading in the background (a bad setting is not retried:
        it cannot heal without a restart)."""
        try:
            await self._load()
        except ConfigError as exc:
            log.error("embedder misconfigured; search stays lexical-only: %s", exc)
        except Exception as exc:
            log.error("embedder unavailable at start-up, retrying in the background: %s", exc)
            self._retrying = asyncio.get_running_loop().create_task(self._retry())

    async def _load(self) -> None:
        embedder = await asyncio.to_thread(self.build, self.settings)
        await asyncio.to_thread(embedder.embed, ["warm-up"])
        self.current = embedder

    async def _retry(self) -> None:
        def report(attempt: int, exc: BaseException) -> None:
            log.warning("embedder still unavailable (attempt %d): %s", attempt, exc)

        try:
            await retry_until_done(self._load, max_wait=EMBEDDER_RETRY_MAX_WAIT,
                                   give_up=(ConfigError,), on_retry=report)
        except ConfigError as exc:
            log.error("embedder misconfigured; search stays lexical-only: %s", exc)
            return
        log.info("embedder loaded: search is hybrid again")

    async def close(self) -> None:
        """Stop retrying."""
        if self._retrying is not None:
            self._retrying.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retrying
