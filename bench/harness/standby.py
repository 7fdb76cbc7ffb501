"""A streaming standby of an embedded Postgres, for the tests and benchmarks of reads from a
standby (POSTGRES_READ_DSN): `pg_basebackup -R` from the running server into a directory of
its own, then `pg_ctl start` on another port, with the bundled binaries (as the unprivileged
user when run as root, as `pipeline/services/postgres.py` runs them)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from pipeline.postgres.lsn import parse_lsn
from pipeline.services.postgres import PG_OS_USER, PostgresService, _as_root, _bin_dir
from pipeline.services.settings import PG_DATABASE
from pipeline.settings import Settings

# The application_name of the API's read pool on the standby (pipeline/wiring/services.py).
STANDBY_POOL = "brainstream-read-standby"


def run_pg(args: list[str], timeout: float = 120) -> None:
    """Run a bundled Postgres binary (as the unprivileged user when we are root)."""
    argv = [str(_bin_dir() / args[0]), *args[1:]]
    if _as_root():
        argv = ["runuser", "-u", PG_OS_USER, "--", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]}: {done.stderr or done.stdout}")


class Standby:
    """A streaming standby of `primary`'s embedded Postgres under `root`, on `port`."""

    def __init__(self, primary: Settings, root: Path, port: int) -> None:
        self.primary = primary
        self.root = root
        self.pgdata = root / "pgdata"
        self.log = root / "postgres.log"
        self.port = port
        self.dsn = f"postgresql://postgres@127.0.0.1:{port}/{PG_DATABASE}"

    def create(self) -> None:
        """A fresh base backup of the primary (replication settings written: `-R`), started."""
        if self.root.exists():
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True)
        if _as_root():
            PostgresService(self.primary)._prepare_permissions()  # the binaries, reachable
            user = pwd.getpwnam(PG_OS_USER)
            os.chown(self.root, user.pw_uid, user.pw_gid)
        run_pg(["pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary.pg_port),
                "-U", "postgres", "-D", str(self.pgdata), "-R", "-X", "stream", "-c", "fast"])
        self.start()

    def start(self) -> None:
        """Start the standby (hot_standby_feedback: the primary's vacuum then never cancels a
        read running on it)."""
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                   "-c unix_socket_directories='' -c max_connections=300 "
                   "-c shared_buffers=128MB -c hot_standby_feedback=on")
        run_pg(["pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-l", str(self.log),
                "-o", options, "start"], timeout=90)

    def stop(self) -> None:
        """Stop the standby (fast), if it runs."""
        if (self.pgdata / "postmaster.pid").exists():
            run_pg(["pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-m", "fast", "stop"])

    def one(self, query: str, params: tuple[Any, ...] = ()) -> Any:
        """The first column of the first row of `query` on the standby."""
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute(query, params).fetchone()
        return None if row is None else row[0]

    def replayed(self) -> int:
        """The position the standby has replayed."""
        return parse_lsn(self.one("SELECT pg_last_wal_replay_lsn()::text"))

    def last_read(self) -> tuple[int, datetime | None]:
        """How many API read-pool backends the standby has, and when the last of them ran a
        statement: it moves exactly when a read went to the standby."""
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute("SELECT count(*), max(state_change) FROM pg_stat_activity"
                               " WHERE application_name = %s", (STANDBY_POOL,)).fetchone()
        assert row is not None
        return int(row[0]), row[1]


def primary_position(settings: Settings) -> int:
    """The primary's current WAL position."""
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return parse_lsn(row[0])
