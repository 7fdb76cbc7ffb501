"""What every service of the stack offers, embedded or external."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from pipeline.domain.setting_values import redact_credentials
from pipeline.services.process import Daemon
from pipeline.services.settings import StackSettings


@dataclass(frozen=True)
class ServiceStatus:
    """One line of `brainstream services status` (`address` and `detail` carry no credential:
    `Service.status` masks them)."""

    name: str
    mode: str  # "embedded" | "external"
    address: str
    state: str  # "healthy" | "unhealthy" | "stopped"
    pid: int | None = None
    detail: str = ""

    @property
    def healthy(self) -> bool:
        return self.state == "healthy"


class Service(ABC):
    """A server the pipeline needs. Embedded ones are started by us; external ones only probed."""

    name: str = "service"

    # Seconds an embedded service may take to be ready: Postgres and Redis start in about a
    # second, the broker in a few; FalkorDB loading a large graph takes longer (its indexes
    # rebuild after a restart), which only a benchmark's million-part graph reaches.
    start_timeout: float = 60.0

    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        self.data_root: Path = settings.resolved_data_dir

    @property
    @abstractmethod
    def external(self) -> bool:
        """True when configuration names an external server: then nothing is started."""

    @property
    @abstractmethod
    def address(self) -> str:
        """Where clients reach this service (a DSN or URL, without secrets where possible)."""

    @property
    def shown_address(self) -> str:
        """The address as it may be printed, logged or returned: credentials masked (a
        Postgres DSN carries its password under compose)."""
        return redact_credentials(self.address)

    def daemon(self, marker: str) -> Daemon:
        return Daemon(
            name=self.name,
            run_dir=self.data_root / "run",
            log_dir=self.data_root / "logs",
            marker=marker,
        )

    @abstractmethod
    def running_pid(self) -> int | None:
        """The pid of our embedded server when it runs, else None."""

    @abstractmethod
    def probe(self) -> None:
        """Raise unless the service answers requests right now (used for health and readiness)."""

    @abstractmethod
    def start(self) -> bool:
        """Start the embedded server and wait until it is ready; False if it already ran."""

    @abstractmethod
    def stop(self) -> bool:
        """Stop the embedded server; False if it was not running."""

    def status(self) -> ServiceStatus:
        """Probe the service and report its state."""
        mode = "external" if self.external else "embedded"
        pid = None if self.external else self.running_pid()
        address = self.shown_address
        if not self.external and pid is None:
            return ServiceStatus(self.name, mode, address, "stopped")
        try:
            self.probe()
        except Exception as exc:
            # a client's error may quote the DSN it was given
            return ServiceStatus(self.name, mode, address, "unhealthy", pid,
                                 redact_credentials(f"{type(exc).__name__}: {exc}"))
        return ServiceStatus(self.name, mode, address, "healthy", pid)

    def log_path(self) -> Path | None:
        """Where the embedded server writes its log."""
        return None if self.external else self.data_root / "logs" / f"{self.name}.log"
