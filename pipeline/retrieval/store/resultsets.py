"""Result sets in Redis: the ranked list of a search is stored once, so `continue` pages through
the same snapshot from any API process until the TTL expires.

They live in a Redis database of their own (`Settings.result_set_redis_url`), never the Celery
broker's, and every key carries the TTL: under `maxmemory` with `volatile-lru` Redis evicts
result sets only. What an item holds (ids and scores) is decided by `pipeline/retrieval/paging.py`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from pipeline.domain.errors import Unavailable


class RedisResultSets:
    """ResultSetStore on Redis; keys are namespaced so one tenant cannot read another's set."""

    def __init__(self, client: aioredis.Redis, *, ttl_seconds: int = 900,
                 prefix: str = "brainstream:rs") -> None:
        self.client = client
        self.ttl = ttl_seconds
        self.prefix = prefix

    @classmethod
    def from_url(cls, url: str, *, ttl_seconds: int = 900) -> RedisResultSets:
        return cls(aioredis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=3),
                   ttl_seconds=ttl_seconds)

    def _key(self, namespace: uuid.UUID, result_set_id: str) -> str:
        return f"{self.prefix}:{namespace}:{result_set_id}"

    async def save(self, namespace: uuid.UUID, items: Sequence[dict[str, object]],
                   meta: dict[str, object]) -> str:
        result_set_id = uuid.uuid4().hex
        body = json.dumps({"items": list(items), "meta": meta}, separators=(",", ":"),
                          default=str)
        try:
            await self.client.set(self._key(namespace, result_set_id), body, ex=self.ttl)
        except RedisError as exc:
            raise Unavailable(f"result-set store: {exc}") from exc
        return result_set_id

    async def load(self, namespace: uuid.UUID, result_set_id: str
                   ) -> tuple[list[dict[str, object]], dict[str, object]] | None:
        if not result_set_id.isalnum() or len(result_set_id) > 64:
            return None
        try:
            raw = await self.client.get(self._key(namespace, result_set_id))
        except RedisError as exc:
            raise Unavailable(f"result-set store: {exc}") from exc
        if raw is None:
            return None
        data: dict[str, Any] = json.loads(raw)
        return list(data["items"]), dict(data["meta"])

    async def ping(self) -> None:
        try:
            await self.client.ping()
        except RedisError as exc:
            raise Unavailable(f"redis: {exc}") from exc

    async def close(self) -> None:
        await self.client.aclose()
