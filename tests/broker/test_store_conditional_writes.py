"""The broker's S3 store honours conditional writes and never shows a partly written object.

tansu hands out offsets by rewriting each partition's watermark object with `If-Match` (or
`If-None-Match: *` before it has read one) and writes each batch with `If-None-Match: *`; a store
that ignores them loses acknowledged records (docs/operations.md).
"""

from __future__ import annotations

import http.client
import socket
import threading
import uuid

from bench.broker_durability import OwnBroker
from pipeline.services.broker import S3_BUCKET


def _request(own: OwnBroker, method: str, key: str, body: bytes = b"",
             headers: dict[str, str] | None = None) -> tuple[int, bytes, str]:
    conn = http.client.HTTPConnection("127.0.0.1", own.settings.s3_port, timeout=10)
    try:
        conn.request(method, f"/{S3_BUCKET}/{key}", body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read(), resp.getheader("ETag") or ""
    finally:
        conn.close()


def test_create_only_when_absent(own_broker: OwnBroker) -> None:
    key = f"cond/{uuid.uuid4()}/watermark.json"
    assert _request(own_broker, "PUT", key, b"first", {"If-None-Match": "*"})[0] == 200
    status, body, _ = _request(own_broker, "PUT", key, b"second", {"If-None-Match": "*"})
    assert status == 412 and b"PreconditionFailed" in body
    assert _request(own_broker, "GET", key)[1] == b"first"


def test_update_only_from_the_current_version(own_broker: OwnBroker) -> None:
    key = f"cond/{uuid.uuid4()}/watermark.json"
    assert _request(own_broker, "PUT", key, b"v1", {"If-Match": '"0"'})[0] == 412  # absent
    status, _, etag = _request(own_broker, "PUT", key, b"v1")
    assert status == 200 and etag
    assert _request(own_broker, "PUT", key, b"v2", {"If-Match": '"stale"'})[0] == 412
    status, _, etag2 = _request(own_broker, "PUT", key, b"v2", {"If-Match": etag})
    assert status == 200 and etag2 != etag
    assert _request(own_broker, "PUT", key, b"v3", {"If-Match": etag})[0] == 412
    assert _request(own_broker, "GET", key) == (200, b"v2", etag2)


def test_concurrent_updates_from_one_version_exactly_one_wins(own_broker: OwnBroker) -> None:
    """Two producers on one partition read the same watermark; only one may advance it."""
    key = f"cond/{uuid.uuid4()}/watermark.json"
    etag = _request(own_broker, "PUT", key, b"0")[2]
    statuses: list[int] = []
    lock = threading.Lock()

    def update(n: int) -> None:
        status = _request(own_broker, "PUT", key, f"from 0 by {n}".encode(),
                          {"If-Match": etag})[0]
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=update, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] + [412] * 7


def test_an_upload_cut_short_replaces_nothing(own_broker: OwnBroker) -> None:
    """A client killed mid-upload (tansu on SIGKILL) leaves the object as it was, unlisted."""
    key = f"cond/{uuid.uuid4()}/00000000000000000000.batch"
    assert _request(own_broker, "PUT", key, b"whole batch")[0] == 200
    with socket.create_connection(("127.0.0.1", own_broker.settings.s3_port), timeout=10) as s:
        s.sendall(f"PUT /{S3_BUCKET}/{key} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  f"Content-Length: 1000\r\n\r\n".encode() + b"cut short")
    assert _request(own_broker, "GET", key)[:2] == (200, b"whole batch")
    status, listing, _ = _request(own_broker, "GET", f"?prefix={key.rsplit('/', 1)[0]}/")
    assert status == 200 and listing.count(b"<Key>") == 1
