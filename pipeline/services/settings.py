"""The stack's settings: where the data lives, which services to use (external ones, or the
embedded ones and their ports), and which index generation this process addresses.

Every group of settings is read like the others (`BRAINSTREAM_<NAME>` or `.env`) by the one
`Settings` of `pipeline/settings.py`; a wing's code receives its own group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import BaseModel, Field, PrivateAttr, field_validator

# The embedded Postgres's database: a deployment that wants another name points POSTGRES_DSN at it.
PG_DATABASE = "brainstream"
# Generation 1's consumer group (`pipeline/generations/active.py`: FIRST_GROUP).
FIRST_CONSUMER_GROUP = "brainstream-consumer"


class StackSettings(BaseModel):
    """Data directory, services, ports, graph name, and the generation addressed."""

    data_dir: Path = Field(
        default=Path(".brainstream"),
        description="Where the embedded services keep their data, pids and logs, and the API "
        "its lexical indexes. Change it to put the data on another disk.")
    postgres_dsn: str | None = Field(
        default=None, description="An external PostgreSQL (18, with pgvector and pg_trgm): "
        "nothing is started for it. Set it in production.")
    postgres_read_dsn: str | None = Field(
        default=None, description="A physical standby (streaming replica) of the primary "
        "Postgres that the API reads from; writes, the consumer and the workers stay on the "
        "primary. Set it to take the read load off the primary; unset, every read goes to the "
        "primary.")
    postgres_read_max_lag: float = Field(
        default=5.0, gt=0, le=3600, description="How many seconds behind the primary the read "
        "standby may be and still serve reads; past it (or while it is down) reads go to the "
        "primary. Raise it when a lagging standby sends too many reads back to the primary and "
        "callers accept older answers; lower it when they must be fresher.")
    kafka_bootstrap: str | None = Field(
        default=None, description="External Kafka bootstrap servers: no embedded broker is "
        "started. Set it in production.")
    falkordb_url: str | None = Field(
        default=None, description="An external FalkorDB (`redis://host:port`): none is started. "
        "Set it in production.")
    redis_url: str | None = Field(
        default=None, description="An external Redis for Celery and result sets "
        "(`redis://host:port/0`): none is started. Set it in production.")
    # Defaults stay below Linux's ephemeral range (32768-60999): a port in it can be held by
    # some client connection's TIME_WAIT.
    pg_port: int = Field(default=15432, ge=1, le=65535, description="The embedded Postgres's "
                         "port (loopback). Change it when the port is taken or two stacks share "
                         "a machine.")
    kafka_port: int = Field(default=19092, ge=1, le=65535, description="The embedded broker's "
                            "port (loopback). Change it as PG_PORT.")
    s3_port: int = Field(default=19000, ge=1, le=65535, description="The embedded broker's "
                         "on-disk store's port (loopback). Change it as PG_PORT.")
    falkordb_port: int = Field(default=16379, ge=1, le=65535, description="The embedded "
                               "FalkorDB's port (loopback). Change it as PG_PORT.")
    redis_port: int = Field(default=16380, ge=1, le=65535, description="The embedded Redis's "
                            "port (loopback). Change it as PG_PORT.")
    graph_name: str = Field(
        default="brainstream", description="The FalkorDB graph of generation 1. Change it when "
        "several deployments share one FalkorDB.")
    # Which index generation these settings address (pipeline/generations/active.py). Not
    # settings an operator sets: `Settings.for_generation` fills them from the control table.
    # Generation 1 is the base database and graph, so unresolved settings address it.
    _generation: int = PrivateAttr(default=1)
    _generation_dbname: str | None = PrivateAttr(default=None)
    _consumer_group: str = PrivateAttr(default=FIRST_CONSUMER_GROUP)

    @field_validator("graph_name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not value.replace("_", "").replace("-", "").isalnum():
            raise ValueError("must contain only letters, digits, '_' and '-'")
        return value

    @property
    def resolved_data_dir(self) -> Path:
        """The data directory as an absolute path (processes may change their cwd)."""
        return self.data_dir.expanduser().resolve()

    @property
    def base_postgres_dsn(self) -> str:
        """The DSN of the base database (generation 1, which holds the generations' control
        table): the configured external Postgres, or the embedded one."""
        if self.postgres_dsn:
            return self.postgres_dsn
        return f"postgresql://postgres@127.0.0.1:{self.pg_port}/{PG_DATABASE}"

    @property
    def effective_postgres_dsn(self) -> str:
        """The DSN of the database of the generation these settings address."""
        if self._generation_dbname is None:
            return self.base_postgres_dsn
        from psycopg.conninfo import make_conninfo

        return make_conninfo(self.base_postgres_dsn, dbname=self._generation_dbname)

    @property
    def effective_postgres_read_dsn(self) -> str | None:
        """The read standby's DSN for the database of the generation these settings address
        (the generation's dbname, as for the primary), or None without a standby."""
        if not self.postgres_read_dsn:
            return None
        if self._generation_dbname is None:
            return self.postgres_read_dsn
        from psycopg.conninfo import make_conninfo

        return make_conninfo(self.postgres_read_dsn, dbname=self._generation_dbname)

    @property
    def generation(self) -> int:
        """The index generation these settings address (1 unless resolved to another)."""
        return self._generation

    @property
    def consumer_group(self) -> str:
        """The Kafka consumer group of the live consumer for this generation."""
        return self._consumer_group

    def addressing(self, generation: int, *, dbname: str | None, consumer_group: str,
                   update: dict[str, object]) -> Self:
        """A copy addressing one index generation (`update` sets what else differs: its graph,
        its embedder)."""
        copy = self.model_copy(update=update)
        copy._generation = generation
        copy._generation_dbname = dbname
        copy._consumer_group = consumer_group
        return copy

    @property
    def effective_kafka_bootstrap(self) -> str:
        """The bootstrap servers of the configured Kafka, or of the embedded broker."""
        return self.kafka_bootstrap or f"127.0.0.1:{self.kafka_port}"

    @property
    def effective_falkordb_url(self) -> str:
        """The URL of the configured FalkorDB, or of the embedded one."""
        return self.falkordb_url or f"redis://127.0.0.1:{self.falkordb_port}"

    @property
    def effective_redis_url(self) -> str:
        """The URL of the configured Redis (Celery broker, caches), or of the embedded one."""
        return self.redis_url or f"redis://127.0.0.1:{self.redis_port}/0"
