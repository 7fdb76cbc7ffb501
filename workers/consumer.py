"""The Celery worker's broker consumer, made to outlive a restart of its Redis.

Celery 5.7 handles a lost broker connection by `collect()`ing the connection, which closes its
channels and detaches the transport from it (`transport.client = None`), and then `close()`ing
it. Every later use of an old channel then raises `AttributeError: 'NoneType' object has no
attribute 'hostname'` (kombu builds a Redis pool from the detached transport's client):

- the close itself, when a task was delivered but not acknowledged yet (`task_acks_late`): the
  default channel is closed a second time and its QoS tries to restore that message;
- the late ack of a task that finished after the loss, run by the event loop of the new
  connection.

Neither error is among the errors Celery treats as a connection loss, so either ended the
whole worker ("Unrecoverable error"). Here both count as what they are, the lost connection:
the close is logged and skipped, and an ack on a detached channel is logged as "Couldn't ack"
like any ack whose connection is gone (kombu treats a stray `KeyError` after a broker restart
the same way). Nothing is lost: the unacknowledged message stays in kombu's unacked set, which a
worker restores after the visibility timeout, and the sweep re-enqueues the work it stood for
from Postgres long before; every task is idempotent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery.worker.consumer import Consumer

log = logging.getLogger(__name__)


class BrokerRestartConsumer(Consumer):  # type: ignore[misc]  # Celery is untyped
    """Celery's consumer, for which a channel of a lost connection is part of the loss."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # read by Celery when it acks or rejects a message, and when it decides whether an
        # error that left the event loop is a connection loss (reconnect) or fatal
        self.connection_errors = (*self.conninfo.connection_errors, AttributeError)

    def on_connection_error_after_connected(self, exc: Exception) -> None:
        connection = self.connection
        if connection is not None:
            connection.close = _tolerant_close(connection.close)
        super().on_connection_error_after_connected(exc)


def _tolerant_close(close: Callable[[], Any]) -> Callable[[], None]:
    def tolerant() -> None:
        try:
            close()
        except AttributeError as exc:  # the detached transport; see the module docstring
            log.warning("closing the lost broker connection failed (%r); its unacknowledged "
                        "messages come back after the visibility timeout", exc)
    return tolerant
