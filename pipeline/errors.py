"""The one error hierarchy of brainstream.

Every error carries a stable machine-readable `code`; the API maps codes to HTTP statuses and the
dead-letter topic records the same code and message. Callers test with `isinstance`, never on text.
"""

from __future__ import annotations


class BrainstreamError(Exception):
    """Base of every error the product raises on purpose."""

    code = "internal"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def to_dict(self) -> dict[str, str]:
        """The JSON shape used by the API and the dead-letter headers."""
        out = {"code": self.code, "message": self.message}
        if self.field is not None:
            out["field"] = self.field
        return out


class ConfigError(BrainstreamError):
    """A setting is missing or malformed."""

    code = "bad_config"


class InvalidInput(BrainstreamError):
    """An event or request does not satisfy its contract."""

    code = "invalid_input"


class NotFound(BrainstreamError):
    """The thing asked for does not exist (or is not visible to the caller)."""

    code = "not_found"


class Unavailable(BrainstreamError):
    """A dependency (database, broker, graph, embedder) cannot be reached right now."""

    code = "unavailable"


class ServiceError(BrainstreamError):
    """An embedded service could not be started, stopped or reached."""

    code = "service_error"


class PortInUse(ServiceError):
    """The port an embedded service must listen on is taken by another process."""

    code = "port_in_use"


class MigrationError(BrainstreamError):
    """A schema migration failed or the database disagrees with the settings."""

    code = "migration_error"
