"""A host's lexical replica: the Tantivy indexes under its own data directory, with where it is
in the change log of one database.

Every read host keeps its own replica (`DATA_DIR/lexical/gen-<N>/`): Tantivy's files are local
and not for a network filesystem, so hosts share Postgres and the log, never the files. A
replica's state is its cursor (`changes.Cursor`), kept in `replica.<database>.json` beside the
indexes (a cursor means nothing in another database's log) and written after their commit, so
a replica killed between the two applies some rows again (idempotent: a root is re-read whole).
It is also reported to `lexical_replicas`, which the log is pruned by and `status` lists.

One writer per data directory at a time: an exclusive lock on `replica.lock` (`flock`), taken by
whoever applies the log there (an API process's follower, `lexical rebuild`, a replay's step),
so the other API processes of the host only read.

A replica builds itself from Postgres (`LexicalWriter.run`) when it has no state, when its
registration is gone (forgotten after `REPLICA_TTL_SECONDS`, or a new database), or when its
cursor is below the pruned rows.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from pipeline.lexical.changes import Cursor
from pipeline.lexical.documents import generation_dir
from pipeline.services.settings import StackSettings

LOCK_FILE = "replica.lock"
ID_FILE = "replica-id"


@dataclass(frozen=True)
class ReplicaState:
    """What a replica has applied: its name and cursor."""

    replica: str
    cursor: Cursor


def replica_name(data_dir: Path) -> str:
    """This data directory's replica name, stable across restarts: the host's name and an id
    kept in `lexical/replica-id` (two data directories on one host are two replicas)."""
    path = data_dir / "lexical" / ID_FILE
    try:
        ident = path.read_text().strip()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        ident = uuid.uuid4().hex[:12]
        tmp = path.with_name(f"{ID_FILE}.{os.getpid()}.tmp")
        tmp.write_text(ident + "\n")
        try:
            os.link(tmp, path)  # first writer wins; a concurrent one reads the winner's id
        except FileExistsError:
            ident = path.read_text().strip()
        finally:
            tmp.unlink(missing_ok=True)
    return f"{socket.gethostname()}:{ident}"


def _state_path(settings: StackSettings) -> Path:
    dbname = conninfo_to_dict(settings.effective_postgres_dsn).get("dbname") or "postgres"
    return generation_dir(settings.resolved_data_dir, settings.generation) / \
        f"replica.{dbname}.json"


def read_state(settings: StackSettings) -> ReplicaState | None:
    """The replica's state in this data directory for the database and generation of
    `settings` (None: it never finished building itself)."""
    try:
        raw = json.loads(_state_path(settings).read_text())
        return ReplicaState(str(raw["replica"]), Cursor(int(raw["cursor"][0]),
                                                         int(raw["cursor"][1])))
    except (FileNotFoundError, ValueError, KeyError, TypeError, IndexError):
        return None


def replica_cursor(settings: StackSettings) -> tuple[int, int] | None:
    """The cursor (xid, id) of this data directory's replica of `settings`' database and
    generation, as its state file says (None: it never finished building itself)."""
    state = read_state(settings)
    return None if state is None else (state.cursor.xid, state.cursor.id)


def write_state(settings: StackSettings, state: ReplicaState) -> None:
    """Replace the state atomically (a rename), after the indexes it describes committed."""
    path = _state_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"replica": state.replica,
                               "cursor": [state.cursor.xid, state.cursor.id]}))
    os.replace(tmp, path)


def clear_state(settings: StackSettings) -> None:
    """Forget the cursor: the replica builds itself again before it serves as current."""
    _state_path(settings).unlink(missing_ok=True)


@contextmanager
def replica_lock(data_dir: Path, generation: int, *, wait: bool = False) -> Iterator[bool]:
    """Hold the replica's writer lock for the block: yields True; or False at once when another
    process (or another holder in this one) has it and `wait` is off."""
    base = generation_dir(data_dir, generation)
    base.mkdir(parents=True, exist_ok=True)
    fd = os.open(base / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
