"""Does the embedded broker keep every record it acknowledged? Publish, break it, read back, diff.

Each cycle publishes to a fresh topic from N publishers at once (kafka-python, acks=all, one
producer and so one connection each, every publisher writing to every partition), records every
acknowledged (partition, offset, payload id), hits the broker or its S3 store with one fault at a
random moment (SIGTERM or SIGKILL, then a start), publishes on, then reads every partition from
the start and diffs the read-back against the acknowledged set. A `none` cycle (no fault) is the
control: it separates what concurrency alone loses from what a restart adds.

Run on a broker and store of its own (own data dir and ports, nothing else is touched):

    python -m bench.broker.durability --cycles 20 --faults broker-term,broker-kill

It prints one line per cycle and `N acknowledged records lost` per fault and in total; exit status
1 when anything acknowledged was lost.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError

from pipeline.services import broker as broker_module
from pipeline.services.base import Service
from pipeline.services.broker import BrokerService, S3StoreService, project_root
from pipeline.settings import Settings

FAULTS = ("none", "broker-term", "broker-kill", "store-term", "store-kill")


@dataclass(frozen=True)
class Ack:
    """One record the broker acknowledged."""

    partition: int
    offset: int
    rid: str


@dataclass
class CycleResult:
    """What one cycle acknowledged, read back and lost."""

    fault: str
    acked: int
    read: int
    lost: list[Ack]
    tail: int  # lost above the highest offset read back on their partition
    overwritten: int  # lost where another record was read back at the acknowledged offset
    reused: int  # acknowledged offsets handed to two or more records
    send_errors: int
    fault_at: float  # seconds into publishing
    log_lines: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"{self.fault:<12} acked {self.acked:>6}  read {self.read:>6}  "
                f"lost {len(self.lost):>5} (tail {self.tail}, middle "
                f"{len(self.lost) - self.tail}, overwritten {self.overwritten})  "
                f"offsets acked twice {self.reused:>4}  send errors {self.send_errors:>4}  "
                f"fault at {self.fault_at:.1f}s")


class Publishers:
    """N threads, each with its own acks=all producer, publishing until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, count: int,
                 batch: int = 20) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.batch = batch
        self.acks: list[Ack] = []
        self.errors = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(n,), daemon=True)
                         for n in range(count)]

    def start(self) -> Publishers:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)

    def _acked(self, rid: str, meta: object) -> None:
        with self._lock:
            self.acks.append(Ack(meta.partition, meta.offset, rid))  # type: ignore[attr-defined]

    def _failed(self, _exc: BaseException) -> None:
        with self._lock:
            self.errors += 1

    def _run(self, number: int) -> None:
        rng = random.Random(number)
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=False,
            retries=10, max_in_flight_requests_per_connection=1, linger_ms=5,
            request_timeout_ms=10_000, reconnect_backoff_max_ms=500,
            client_id=f"durability-{number}")
        seq = 0
        try:
            while not self._stop.is_set():
                for _ in range(self.batch):
                    rid = f"{number}-{seq}"
                    seq += 1
                    future = producer.send(self.topic, json.dumps({"id": rid}).encode(),
                                           partition=rng.randrange(self.partitions))
                    future.add_callback(lambda meta, rid=rid: self._acked(rid, meta))
                    future.add_errback(self._failed)
                with contextlib.suppress(KafkaError):
                    producer.flush(timeout=30)
        finally:
            with contextlib.suppress(KafkaError):
                producer.close(timeout=30)


def read_back(bootstrap: str, topic: str, partitions: int, acked: list[Ack],
              idle: float = 30.0, limit: float = 300.0) -> list[Ack]:
    """Every record of every partition from the start, until each partition has been read up to
    the highest offset acknowledged on it, or nothing new came for `idle` seconds (then what is
    missing is lost), or `limit` passed.

    The broker's end offsets are not used (it misreports them): the acknowledged offsets are the
    target. A short idle window is no stop rule here: tansu lists every batch object of a
    partition and reads them one by one on each fetch, so one fetch of a partition that took a few
    thousand produce requests can take longer than any fixed pause between records (a 3 s window
    reported 10,740 stored records as lost in the fault suite, docs/operations.md). Each fetch is
    kept small so that none outlasts the client's request timeout."""
    target: dict[int, int] = {}
    for a in acked:
        target[a.partition] = max(target.get(a.partition, -1), a.offset)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             group_id=None, auto_offset_reset="earliest",
                             fetch_max_bytes=64 * 1024, max_partition_fetch_bytes=64 * 1024,
                             request_timeout_ms=60_000, client_id="durability-reader")
    records: list[Ack] = []
    top: dict[int, int] = {}
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        last = time.monotonic()
        deadline = last + limit
        while time.monotonic() - last < idle and time.monotonic() < deadline:
            if all(top.get(p, -1) >= end for p, end in target.items()):
                break
            for batch in consumer.poll(timeout_ms=500).values():
                for record in batch:
                    records.append(Ack(record.partition, record.offset,
                                       json.loads(record.value)["id"]))
                    top[record.partition] = max(top.get(record.partition, -1), record.offset)
                    last = time.monotonic()
    finally:
        consumer.close()
    return records


def diff(fault: str, acks: list[Ack], read: list[Ack], send_errors: int, fault_at: float,
         log_lines: list[str]) -> CycleResult:
    """Which acknowledged records the read-back lacks, and where they were."""
    seen = {r.rid for r in read}
    at: dict[tuple[int, int], set[str]] = defaultdict(set)
    for r in read:
        at[(r.partition, r.offset)].add(r.rid)
    top: dict[int, int] = {}
    for r in read:
        top[r.partition] = max(top.get(r.partition, -1), r.offset)
    lost = [a for a in acks if a.rid not in seen]
    per_offset = Counter((a.partition, a.offset) for a in acks)
    return CycleResult(
        fault=fault, acked=len(acks), read=len(read), lost=lost,
        tail=sum(1 for a in lost if a.offset > top.get(a.partition, -1)),
        overwritten=sum(1 for a in lost if at.get((a.partition, a.offset))),
        reused=sum(1 for n in per_offset.values() if n > 1),
        send_errors=send_errors, fault_at=fault_at, log_lines=log_lines)


class OwnBroker:
    """An S3 store and a broker of the harness alone."""

    def __init__(self, data_dir: Path, kafka_port: int, s3_port: int) -> None:
        self.settings = Settings(_env_file=None, data_dir=data_dir,  # type: ignore[call-arg]
                                 kafka_port=kafka_port, s3_port=s3_port)
        self.store = S3StoreService(self.settings)
        self.broker = BrokerService(self.settings)

    @property
    def bootstrap(self) -> str:
        return self.settings.effective_kafka_bootstrap

    def start(self) -> None:
        self.store.start()
        self.broker.start()

    def stop(self) -> None:
        self.broker.stop()
        self.store.stop()

    def create_topic(self, topic: str, partitions: int) -> None:
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=15000,
                                 client_id="durability-admin")
        try:
            admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                          replication_factor=1)])
        finally:
            admin.close()

    def fault(self, fault: str) -> None:
        """Apply one fault and start what it stopped again."""
        if fault == "none":
            return
        target, how = fault.split("-")
        service: Service = self.broker if target == "broker" else self.store
        if how == "term":
            service.stop()
        else:
            _kill_tree(service)
        time.sleep(0.5)
        service.start()
        if target == "store":  # the broker keeps running over the restarted store
            self.broker.start()

    def logs(self) -> dict[str, int]:
        """Where each service's log ends now (to show what a cycle added)."""
        return {s.name: _size(s.log_path()) for s in (self.broker, self.store)}

    def new_log_lines(self, since: dict[str, int]) -> list[str]:
        lines: list[str] = []
        for service in (self.broker, self.store):
            path = service.log_path()
            if path is None or not path.exists():
                continue
            with open(path, "rb") as handle:
                handle.seek(since.get(service.name, 0))
                text = handle.read().decode(errors="replace")
            lines += [f"{service.name}: {line[:300]}" for line in text.splitlines()
                      if line.strip() and not line.startswith("---")]
        return lines


def _plain_s3rver() -> list[str]:
    return [str(project_root() / "node_modules" / ".bin" / "s3rver")]


def _size(path: Path | None) -> int:
    return path.stat().st_size if path is not None and path.exists() else 0


def _kill_tree(service: Service) -> None:
    pid = service.running_pid()
    if pid is None:
        return
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(procs, timeout=10)


def run_cycle(own: OwnBroker, fault: str, cycle: int, *, publishers: int, partitions: int,
              rng: random.Random, after: float = 1.5) -> CycleResult:
    """One cycle: publish, fault at a random moment, publish on, read back, diff."""
    topic = f"durability-{cycle}-{fault}"
    own.create_topic(topic, partitions)
    marks = own.logs()
    pubs = Publishers(own.bootstrap, topic, partitions, publishers).start()
    fault_at = rng.uniform(0.5, 2.5)
    time.sleep(fault_at)
    own.fault(fault)
    time.sleep(after)
    pubs.stop()
    read = read_back(own.bootstrap, topic, partitions, pubs.acks)
    return diff(fault, pubs.acks, read, pubs.errors, fault_at, own.new_log_lines(marks))


def summary(results: list[CycleResult]) -> Iterator[str]:
    """The table per fault and the `N acknowledged records lost` lines."""
    by_fault: dict[str, list[CycleResult]] = defaultdict(list)
    for result in results:
        by_fault[result.fault].append(result)
    yield (f"{'fault':<12} {'cycles':>6} {'with loss':>9} {'acked':>8} {'lost':>6} "
           f"{'tail':>5} {'middle':>6} {'overwritten':>11} {'offsets acked twice':>19}")
    for fault, rows in by_fault.items():
        lost = sum(len(r.lost) for r in rows)
        tail = sum(r.tail for r in rows)
        yield (f"{fault:<12} {len(rows):>6} {sum(1 for r in rows if r.lost):>9} "
               f"{sum(r.acked for r in rows):>8} {lost:>6} {tail:>5} {lost - tail:>6} "
               f"{sum(r.overwritten for r in rows):>11} {sum(r.reused for r in rows):>19}")
    for fault, rows in by_fault.items():
        yield f"{fault}: {sum(len(r.lost) for r in rows)} acknowledged records lost"
    yield f"total: {sum(len(r.lost) for r in results)} acknowledged records lost"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.broker.durability",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=3, help="cycles per fault")
    parser.add_argument("--faults", default="none,broker-term,broker-kill",
                        help=f"comma-separated, of {', '.join(FAULTS)}")
    parser.add_argument("--publishers", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    offset = int(os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0"))
    parser.add_argument("--kafka-port", type=int, default=29092 + 80 + offset)
    parser.add_argument("--s3-port", type=int, default=29000 + 80 + offset)
    parser.add_argument("--plain-s3rver", action="store_true",
                        help="run s3rver unpatched (ignoring conditional writes), as before the "
                             "fix, to reproduce the loss")
    parser.add_argument("--keep", action="store_true", help="keep the data dir (for forensics)")
    parser.add_argument("--show-logs", type=int, default=5,
                        help="log lines shown per cycle (what broker and store logged)")
    args = parser.parse_args(argv)
    faults = args.faults.split(",")
    unknown = set(faults) - set(FAULTS)
    if unknown:
        parser.error(f"unknown faults: {', '.join(sorted(unknown))}")
    if args.plain_s3rver:
        broker_module.s3store_argv = _plain_s3rver
    data_dir = Path(tempfile.mkdtemp(prefix="broker-durability-"))
    own = OwnBroker(data_dir, args.kafka_port, args.s3_port)
    rng = random.Random(args.seed)
    results: list[CycleResult] = []
    started = time.monotonic()
    own.start()
    try:
        for cycle in range(args.cycles):
            for fault in faults:
                result = run_cycle(own, fault, cycle, publishers=args.publishers,
                                   partitions=args.partitions, rng=rng)
                results.append(result)
                print(f"cycle {cycle:>3} {result.line()}", flush=True)
                for line in result.log_lines[:args.show_logs]:
                    print(f"    {line}", flush=True)
    finally:
        own.stop()
        if args.keep:
            print(f"data kept in {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)
    for line in summary(results):
        print(line)
    print(f"({time.monotonic() - started:.0f}s, load average {os.getloadavg()[0]:.1f})")
    return 1 if any(r.lost for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
