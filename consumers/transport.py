"""faust's aiokafka transport with the fetch wait of our settings.

faust fixes the worker consumer's `fetch_max_wait_ms` at 1,500 ms. A broker that does not answer a
fetch as soon as records arrive (the embedded broker holds it to the end of the wait) then
delivers a record up to that long after it was published: on the embedded broker a record waited
up to 0.77 s at 1,500 ms and 0.25 s at 500 ms. An empty fetch costs the broker and its store
little (0.18 CPU-s in 20 s at 500 ms, against 0.11 at 1,500), so the wait is a setting,
`CONSUMER_FETCH_WAIT_MS` (docs/operations.md).
"""

from __future__ import annotations

from typing import Any

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka


class _ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # aiokafka hands this attribute to its fetcher when the consumer starts (not before).
        app: Any = self.app  # our App (faust types it as AppT)
        consumer._fetch_max_wait_ms = app.fetch_wait_ms
        return consumer


class _Consumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> Any:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class _Transport(faust_aiokafka.Transport):
    Consumer = _Consumer


class App(faust.App):
    """A faust app whose worker consumer waits at most `fetch_wait_ms` per fetch."""

    def __init__(self, *args: Any, fetch_wait_ms: int, **kwargs: Any) -> None:
        self.fetch_wait_ms = fetch_wait_ms
        super().__init__(*args, **kwargs)

    def _new_transport(self) -> Any:
        return _Transport(self.conf.broker_consumer, self)
