"""The time the write path stamps rows with (shared by the object and the memory writers)."""

from __future__ import annotations

# The time an event's writes are stamped with: the Kafka record's timestamp when the consumer
# knows it (`PgEventStore.set_event_time`), else the transaction's. Stamping with the record's
# time makes a replay write the same created_at / updated_at / deleted_at as the original run,
# so temporal decay, time filters and the order of tied hits come out the same.
EVENT_TIME = ("coalesce(nullif(current_setting('brainstream.event_time', true), '')"
              "::timestamptz, now())")
