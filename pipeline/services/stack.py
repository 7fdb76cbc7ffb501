"""The embedded default stack as one unit: start in dependency order, stop in reverse."""

from __future__ import annotations

from collections.abc import Callable

from pipeline.services.base import Service, ServiceStatus
from pipeline.services.broker import BrokerService, S3StoreService
from pipeline.services.postgres import PostgresService
from pipeline.services.redis import FalkorDBService, RedisService
from pipeline.services.settings import StackSettings

Report = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


class Stack:
    """Every service the pipeline needs, in start order."""

    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        self.services: list[Service] = [
            PostgresService(settings),
            S3StoreService(settings),
            BrokerService(settings),
            FalkorDBService(settings),
            RedisService(settings),
        ]

    def start(self, report: Report = _quiet) -> None:
        """Start what is embedded and not running; reuse what runs; probe what is external."""
        for service in self.services:
            if service.external:
                service.probe()
                report(f"{service.name:9} external  {service.shown_address}")
                continue
            started = service.start()
            verb = "started " if started else "running "
            report(f"{service.name:9} {verb}  {service.shown_address}")

    def stop(self, report: Report = _quiet) -> None:
        """Stop every embedded service (reverse order: the broker before its storage)."""
        for service in reversed(self.services):
            if service.external:
                continue
            stopped = service.stop()
            report(f"{service.name:9} {'stopped' if stopped else 'not running'}")

    def status(self) -> list[ServiceStatus]:
        """The state of each service, probing it."""
        return [service.status() for service in self.services]
