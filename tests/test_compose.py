"""Static checks of the production compose stack (compose/): no Docker needed.

The compose file is parsed with PyYAML (`safe_load` resolves the `x-app-env` anchor and the `<<`
merge keys). Every `BRAINSTREAM_*` name used by the stack must be a real setting, because the app
silently ignores unknown ones. The image itself: tests/test_image.py.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.kafka.topics import wanted_partitions
from pipeline.settings import Settings
from tests.composeutil import (
    COMPOSE_DIR,
    DOCKERFILE,
    ROOT,
    interpolate as _interpolate,
)

COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"
ENV_EXAMPLE = COMPOSE_DIR / ".env.example"
README = COMPOSE_DIR / "README.md"
CADDYFILE = COMPOSE_DIR / "Caddyfile"

PREFIX = "BRAINSTREAM_"
# service -> accepted image repositories (the "image family")
INFRA_IMAGES = {
    "kafka": {"apache/kafka", "apache/kafka-native"},
    "postgres": {"pgvector/pgvector"},
    "falkordb": {"falkordb/falkordb"},
    "redis": {"redis"},
}
APP_COMMANDS = {"migrate": "migrate", "consumer": "consumer", "worker": "worker",
                "extract": "worker", "api": "api"}
EXTERNAL_URLS = (
    "BRAINSTREAM_POSTGRES_DSN",
    "BRAINSTREAM_KAFKA_BOOTSTRAP",
    "BRAINSTREAM_FALKORDB_URL",
    "BRAINSTREAM_REDIS_URL",
)
VAR_RE = re.compile(r"\bBRAINSTREAM_[A-Z0-9_]+")


# -- helpers --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict), "docker-compose.yml must be a mapping"
    assert isinstance(data.get("services"), dict), "docker-compose.yml has no services"
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        pairs = (item.split("=", 1) for item in env)
        return {p[0]: (p[1] if len(p) > 1 else "") for p in pairs}
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def _depends_on(service: dict[str, Any]) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):  # short form means service_started
        return dict.fromkeys(deps, "service_started")
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def _command(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command")
    if cmd is None:
        return []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def _healthcheck_test(service: dict[str, Any]) -> str:
    check = service.get("healthcheck")
    assert isinstance(check, dict), "no healthcheck"
    assert not check.get("disable"), "healthcheck disabled"
    test = check.get("test")
    assert test, "healthcheck without a test"
    if isinstance(test, str):
        return test
    assert test[0] in ("CMD", "CMD-SHELL"), f"unexpected healthcheck form {test[0]!r}"
    return " ".join(str(part) for part in test[1:])


def _env_example() -> dict[str, str]:
    """KEY=VALUE lines of compose/.env.example (comments skipped, surrounding quotes removed)."""
    values: dict[str, str] = {}
    for number, raw in enumerate(ENV_EXAMPLE.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key), (
            f".env.example line {number} is not KEY=VALUE: {raw!r}"
        )
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key] = value
    return values


# -- infrastructure ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(INFRA_IMAGES))
def test_infra_service_uses_expected_image(services: dict[str, Any], name: str) -> None:
    assert name in services, f"service {name!r} missing from docker-compose.yml"
    image = services[name].get("image")
    assert image, f"{name} has no image"
    repository, _, tag = str(image).partition(":")
    assert repository in INFRA_IMAGES[name], f"{name} uses {image!r}"
    assert tag and tag != "latest", f"{name} image must be pinned to a tag, got {image!r}"


def test_pinned_infra_versions(services: dict[str, Any]) -> None:
    assert services["postgres"]["image"] == "pgvector/pgvector:pg17"
    assert services["falkordb"]["image"] == "falkordb/falkordb:v4.16.3"
    assert str(services["redis"]["image"]).startswith("redis:7.4")


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("kafka", "/opt/kafka/bin/kafka-"),
        ("postgres", "pg_isready"),
        ("falkordb", "redis-cli"),
        ("redis", "redis-cli"),
        ("api", "http://localhost:8000/healthz"),
    ],
)
def test_healthchecks(services: dict[str, Any], name: str, needle: str) -> None:
    assert needle in _healthcheck_test(services[name])


def test_kafka_runs_kraft_single_node(services: dict[str, Any]) -> None:
    env = _environment(services["kafka"])
    assert set(env.get("KAFKA_PROCESS_ROLES", "").split(",")) == {"broker", "controller"}
    assert env.get("KAFKA_CONTROLLER_QUORUM_VOTERS", "").startswith(env.get("KAFKA_NODE_ID", "?"))
    assert "PLAINTEXT://kafka:9092" in env.get("KAFKA_ADVERTISED_LISTENERS", "")
    assert env.get("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR") == "1"


def test_infra_data_on_named_volumes(compose: dict[str, Any], services: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    for name in INFRA_IMAGES:
        mounts = [str(v).split(":", 1)[0] for v in services[name].get("volumes") or []]
        named = [m for m in mounts if m in declared]
        assert named, f"{name} keeps its data on no named volume (mounts: {mounts})"


# -- published ports: no unauthenticated listener beyond the host ----------------------------

LOOPBACK = {"127.0.0.1", "::1", "[::1]", "localhost"}
# Kafka security protocols that authenticate the client over an encrypted connection.
AUTHENTICATED_KAFKA = {"SASL_SSL"}


def _published(service: dict[str, Any],
               env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(host ip, container port) of each published port, its variables taken from `env`
    (default: .env.example); "" is every interface."""
    example = _env_example() if env is None else env
    out = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):  # long syntax
            out.append((str(port.get("host_ip", "")), str(port["target"])))
            continue
        spec = _interpolate(str(port), example).split("/")[0]
        if spec.startswith("["):  # [ipv6]:host:container
            host_ip, _, rest = spec[1:].partition("]:")
            out.append((host_ip, rest.rsplit(":", 1)[-1]))
            continue
        parts = spec.split(":")
        out.append((parts[0] if len(parts) == 3 else "", parts[-1]))
    return out


def _kafka_listener_protocols(service: dict[str, Any]) -> dict[str, str]:
    """Container port -> security protocol of each Kafka listener."""
    env = _environment(service)
    protocols = dict(pair.split(":", 1) for pair in
                     env.get("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "").split(",") if pair)
    out = {}
    for listener in env.get("KAFKA_LISTENERS", "").split(","):
        name, _, address = listener.partition("://")
        out[address.rsplit(":", 1)[-1]] = protocols.get(name, name)
    return out


@pytest.mark.parametrize("name", sorted(INFRA_IMAGES))
def test_no_unauthenticated_listener_reaches_other_machines(
    services: dict[str, Any], name: str
) -> None:
    """An event names its own namespace: a PLAINTEXT Kafka listener other machines reach lets
    anyone write into any tenant (and Redis and FalkorDB ask for no password at all). What the
    infrastructure publishes is for the host alone, or an authenticated Kafka listener."""
    protocols = _kafka_listener_protocols(services[name]) if name == "kafka" else {}
    for host_ip, target in _published(services[name]):
        assert host_ip in LOOPBACK or protocols.get(target) in AUTHENTICATED_KAFKA, (
            f"{name} publishes port {target} ({protocols.get(target, 'unauthenticated')}) on "
            f"{host_ip or 'every interface'}")


# -- application services ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "subcommand"), sorted(APP_COMMANDS.items()))
def test_app_service_builds_dockerfile_and_runs_subcommand(
    services: dict[str, Any], name: str, subcommand: str
) -> None:
    service = services.get(name)
    assert service, f"service {name!r} missing"
    build = service.get("build")
    assert isinstance(build, dict), f"{name} must be built from compose/Dockerfile"
    context = (COMPOSE_DIR / build["context"]).resolve()
    assert context == ROOT, f"{name}: build context must be the repository root"
    assert (context / build["dockerfile"]).resolve() == DOCKERFILE.resolve()
    # ENTRYPOINT is `brainstream`, so the command is the subcommand (optionally spelled out).
    command = _command(service)
    if command[:1] == ["brainstream"]:
        command = command[1:]
    assert command[:1] == [subcommand], f"{name} runs {command!r}"


def test_migrate_waits_for_healthy_infra(services: dict[str, Any]) -> None:
    deps = _depends_on(services["migrate"])
    for name in INFRA_IMAGES:
        assert deps.get(name) == "service_healthy", f"migrate must wait for {name} to be healthy"
    assert services["migrate"].get("restart", "no") in ("no", False), "migrate is one-shot"


@pytest.mark.parametrize("name", ["consumer", "worker", "extract", "api"])
def test_migrate_gates_long_running_services(services: dict[str, Any], name: str) -> None:
    assert _depends_on(services[name]).get("migrate") == "service_completed_successfully"


def test_api_port(services: dict[str, Any]) -> None:
    """Clients reach the API through the gateway; the replicas publish nothing (so
    `--scale api=N` has no port to fight over)."""
    ports = [str(p) for p in services["gateway"].get("ports") or []]
    assert any(p.endswith(":8000") for p in ports), ports
    assert not services["api"].get("ports"), "api replicas must not publish a port"


def test_api_published_on_loopback_by_default(services: dict[str, Any]) -> None:
    """The API speaks plain HTTP and its keys travel in a header: by default only the host
    reaches its gateway, other machines through the TLS proxy (profile `proxy`). Both without a
    compose/.env and with the one copied from .env.example."""
    for source, env in (("no compose/.env", {}), (".env.example", _env_example())):
        published = _published(services["gateway"], env)
        assert published, f"the API publishes no port ({source})"
        for host_ip, target in published:
            assert host_ip in LOOPBACK, (
                f"with {source} the API publishes port {target} on {host_ip or 'every interface'}")


def test_tls_proxy_is_opt_in_and_keeps_metrics_private(
    compose: dict[str, Any], services: dict[str, Any]
) -> None:
    """The optional Caddy proxy (compose/README.md, "HTTPS"): only under its profile, its
    Caddyfile from compose/, every request to the API but /metrics (no key needed there)."""
    proxy = services.get("proxy")
    assert proxy, "no proxy service"
    assert proxy.get("profiles") == ["proxy"], "the proxy must start only with --profile proxy"
    repository, _, tag = str(proxy.get("image", "")).partition(":")
    assert repository == "caddy" and tag and tag != "latest", proxy.get("image")
    assert "./Caddyfile:/etc/caddy/Caddyfile:ro" in (proxy.get("volumes") or [])
    assert {"caddy-data", "caddy-config"} <= set(compose.get("volumes") or {})
    assert _environment(proxy).get("PROXY_DOMAIN") == "${PROXY_DOMAIN:-}", (
        "a required ${PROXY_DOMAIN:?} would stop `up` without the profile too")
    assert "PROXY_DOMAIN" in _env_example()
    lines = [line.split("#", 1)[0].split() for line in
             CADDYFILE.read_text(encoding="utf-8").splitlines()]
    lines = [words for words in lines if words]
    assert lines[0] == ["{$PROXY_DOMAIN}", "{"], lines[0]
    upstreams = [words[1:] for words in lines if words[0] == "reverse_proxy"]
    assert upstreams == [["gateway:8000"]], upstreams
    matchers = {words[0]: words[2:] for words in lines
                if words[0].startswith("@") and words[1:2] == ["path"]}
    refused = [words[1] for words in lines if words[0] == "respond" and words[-1] == "404"]
    assert any(target == "/metrics" or "/metrics" in matchers.get(target, [])
               for target in refused), "the proxy must answer /metrics with 404"


def test_the_stack_scales_out_as_written(compose: dict[str, Any],
                                         services: dict[str, Any]) -> None:
    """`up --scale api=3 --scale consumer=2 --scale worker=2` works as written: no app service
    pins a container name or publishes a port (the gateway does, once), no lexical index is
    shared between containers (each api replica builds its own from Postgres: Tantivy is not
    for a network volume), the input topics have partitions for both consumers, and the
    gateway finds the api replicas by DNS and sends requests only to ready ones."""
    for name in APP_COMMANDS:
        assert "container_name" not in services[name], name
        assert not services[name].get("ports"), f"{name} publishes a port: it cannot scale"
        mounts = [str(v) for v in services[name].get("volumes") or []]
        assert not any("lexical" in m for m in mounts), f"{name} shares a lexical index: {mounts}"
    assert "lexical-data" not in (compose.get("volumes") or {})
    env = _environment(services["consumer"])
    partitions = int(_interpolate(env["BRAINSTREAM_TOPIC_PARTITIONS"], _env_example()))
    assert partitions >= 2
    gateway = services["gateway"]
    repository, _, tag = str(gateway.get("image", "")).partition(":")
    assert repository == "haproxy" and tag and tag != "latest", gateway.get("image")
    assert "./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro" in (gateway.get("volumes") or [])
    config = [line.split("#", 1)[0].split() for line in
              (COMPOSE_DIR / "haproxy.cfg").read_text(encoding="utf-8").splitlines()]
    config = [words for words in config if words]
    assert ["option", "httpchk", "GET", "/readyz"] in config
    assert ["http-check", "expect", "status", "200"] in config
    templates = [w for w in config if w[0] == "server-template"]
    assert templates and int(templates[0][2]) >= 3 and templates[0][3] == "api:8000", templates
    assert {"check", "resolvers"} <= set(templates[0]), templates
    # the limits every replica enforces together, and the result sets they page through
    for name in ("api",):
        assert _environment(services[name]).get("BRAINSTREAM_REDIS_URL"), name


@pytest.mark.parametrize("name", sorted(APP_COMMANDS))
def test_app_services_share_the_anchor_env(
    compose: dict[str, Any], services: dict[str, Any], name: str
) -> None:
    shared = compose.get("x-app-env")
    assert isinstance(shared, dict) and shared, "x-app-env anchor missing"
    env = _environment(services[name])
    for key, value in shared.items():
        assert env.get(key) == str(value), f"{name} does not carry {key} from x-app-env"
    # The four external services are named: the app starts no embedded service.
    for key in EXTERNAL_URLS:
        assert env.get(key), f"{name} lacks {key}"
    assert env.get("BRAINSTREAM_API_HOST") == "0.0.0.0"


# -- settings names ---------------------------------------------------------------------------


def _names_used(path: Path) -> set[str]:
    return set(VAR_RE.findall(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("path", [COMPOSE_FILE, ENV_EXAMPLE, README, DOCKERFILE], ids=str)
def test_every_brainstream_variable_is_a_setting(path: Path) -> None:
    fields = set(Settings.model_fields)
    used = _names_used(path)
    unknown = sorted(n for n in used if n[len(PREFIX):].lower() not in fields)
    assert not unknown, f"{path.name} uses variables that are not Settings fields: {unknown}"


def test_structured_env_keys_are_settings(services: dict[str, Any]) -> None:
    fields = set(Settings.model_fields)
    seen = 0
    for name, service in services.items():
        for key in _environment(service):
            if key.startswith(PREFIX):
                seen += 1
                assert key[len(PREFIX):].lower() in fields, f"{name}: {key} is not a setting"
    assert seen >= len(EXTERNAL_URLS) * len(APP_COMMANDS)
    assert set(EXTERNAL_URLS) <= _names_used(COMPOSE_FILE)


def test_compose_and_env_example_values_validate(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app environment, interpolated from .env.example, is accepted by Settings."""
    example = _env_example()
    assert "POSTGRES_PASSWORD" in example and "BRAINSTREAM_API_KEYS" in example
    env = {
        k: _interpolate(str(v), example) for k, v in compose["x-app-env"].items()
    }
    env.update({k: v for k, v in example.items() if k.startswith(PREFIX)})
    for key in list(os.environ):
        if key.startswith(PREFIX):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.postgres_dsn and "@postgres:5432/" in settings.postgres_dsn
    assert settings.kafka_bootstrap == "kafka:9092"
    assert settings.api_host == "0.0.0.0" and settings.api_port == 8000
    assert settings.api_keys, "the example API keys must parse to a non-empty mapping"
    assert settings.topic_partitions == int(example["BRAINSTREAM_TOPIC_PARTITIONS"])


def test_migrate_creates_input_topics_for_several_consumers(services: dict[str, Any]) -> None:
    """`migrate` creates the input and dead-letter topics with more than one partition, with or
    without compose/.env, so `--scale consumer=N` has partitions to share."""
    raw = _environment(services["migrate"])["BRAINSTREAM_TOPIC_PARTITIONS"]
    for env in ({}, _env_example()):
        settings = Settings(_env_file=None,  # type: ignore[call-arg]
                            topic_partitions=int(_interpolate(raw, env)))
        for topic in (settings.topic_events, settings.topic_dlq):
            assert wanted_partitions(settings, topic)[0] >= 4, (
                f"compose creates {topic} with {wanted_partitions(settings, topic)[0]} "
                "partitions: too few for several consumers")

