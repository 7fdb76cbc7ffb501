"""The broker's S3 store honours conditional writes, never shows a partly written object, and
lists more than one page of keys.

tansu hands out offsets by rewriting each partition's watermark object with `If-Match` (or
`If-None-Match: *` before it has read one) and writes each batch with `If-None-Match: *`; a store
that ignores them loses acknowledged records (docs/operations.md).
"""

from __future__ import annotations

import hashlib
import http.client
import socket
import threading
import urllib.parse
import uuid
from xml.etree import ElementTree

import pytest

from bench.broker.durability import OwnBroker
from bench.broker.s3store import signed_headers
from pipeline.services.broker import S3_BUCKET

_S3 = "{http://doc.s3.amazonaws.com/2006-03-01/}"  # s3rver's ListBucketResult namespace


def _signed(body: bytes = b"", access_key: str = "S3RVER") -> dict[str, str]:
    return signed_headers(body, access_key)


def _answer(own: OwnBroker, method: str, path: str, body: bytes = b"",
            headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", own.settings.s3_port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read(), {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


def _path(bucket: str, key: str) -> str:
    """A key's path, or the bucket's for a query (`?list-type=2...`), as tansu writes them."""
    return f"/{bucket}{key}" if key.startswith("?") else f"/{bucket}/{key}"


def _request(own: OwnBroker, method: str, key: str, body: bytes = b"",
             headers: dict[str, str] | None = None, *, signed: bool = True
             ) -> tuple[int, bytes, str]:
    """A request as tansu sends it (signed: the store's direct route), or unsigned (s3rver's
    whole chain of middleware)."""
    sent = {**(_signed(body) if signed else {}), **(headers or {})}
    status, answer, got = _answer(own, method, _path(S3_BUCKET, key), body, sent)
    return status, answer, got.get("etag", "")


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


@pytest.mark.parametrize("signed", [True, False], ids=["direct", "whole-chain"])
def test_an_upload_cut_short_replaces_nothing(own_broker: OwnBroker, signed: bool) -> None:
    """A client killed mid-upload (tansu on SIGKILL) leaves the object as it was, unlisted."""
    key = f"cond/{uuid.uuid4()}/00000000000000000000.batch"
    assert _request(own_broker, "PUT", key, b"whole batch")[0] == 200
    extra = "".join(f"{k}: {v}\r\n" for k, v in (_signed(b"x" * 1000) if signed else {}).items())
    with socket.create_connection(("127.0.0.1", own_broker.settings.s3_port), timeout=10) as s:
        s.sendall(f"PUT /{S3_BUCKET}/{key} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}"
                  f"Content-Length: 1000\r\n\r\n".encode() + b"cut short")
    assert _request(own_broker, "GET", key)[:2] == (200, b"whole batch")
    status, listing, _ = _request(own_broker, "GET", f"?prefix={key.rsplit('/', 1)[0]}/")
    assert status == 200 and listing.count(b"<Key>") == 1


def test_a_listing_longer_than_one_page_pages_through_every_key_once(
        own_broker: OwnBroker) -> None:
    """tansu lists every batch object of a partition on each fetch. s3rver answered a listing of
    more than 1,000 keys with 500 (its continuation token needs DES, which Node 17+ lacks), so a
    partition past 1,000 produce requests could not be read at all; and it paged in readdir
    order, so pages would skip and repeat keys."""
    prefix = f"list/{uuid.uuid4()}/records/"
    keys = [f"{prefix}{offset:020d}.batch" for offset in range(1003)]

    def put(chunk: list[str]) -> None:
        for key in chunk:
            assert _request(own_broker, "PUT", key, b"batch", {"If-None-Match": "*"})[0] == 200

    threads = [threading.Thread(target=put, args=(keys[n::8],)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    listed: list[str] = []
    pages = 0
    token = None
    while True:
        query = {"list-type": "2", "prefix": prefix, "max-keys": "400"}
        if token is not None:
            query["continuation-token"] = token
        status, body, _ = _request(own_broker, "GET", "?" + urllib.parse.urlencode(query))
        assert status == 200, body
        page = ElementTree.fromstring(body)
        listed += [e.text or "" for e in page.iter(f"{_S3}Key")]
        pages += 1
        token = page.findtext(f"{_S3}NextContinuationToken")
        if page.findtext(f"{_S3}IsTruncated") != "true":
            break
        assert token
    assert pages == 3 and listed == keys
    whole = ElementTree.fromstring(_request(
        own_broker, "GET", "?" + urllib.parse.urlencode({"list-type": "2", "prefix": prefix}))[1])
    assert len(list(whole.iter(f"{_S3}Key"))) == 1000  # a page holds 1,000 keys at most
    status, body, _ = _request(own_broker, "GET", "?" + urllib.parse.urlencode(
        {"list-type": "2", "prefix": prefix, "continuation-token": "not a token"}))
    assert status == 400 and b"continuation-token" in body


def _listing(own: OwnBroker, query: dict[str, str]) -> str:
    status, body, _ = _request(own, "GET", "?" + urllib.parse.urlencode(query))
    assert status == 200, body
    return body.decode()


def test_the_rendered_listing_is_s3rvers_and_follows_every_write(own_broker: OwnBroker) -> None:
    """ListObjectsV2 as tansu asks for it is rendered by the store (s3rver rebuilt every key's
    element on each fetch); anything else goes through s3rver's own handler, which ignores
    `encoding-type`: the two must answer byte for byte the same, and a rewritten or deleted
    object must not be listed as it was."""
    prefix = f"render/{uuid.uuid4()}/"
    keys = [f"{prefix}records/{offset:020d}.batch" for offset in range(12)]
    keys.append(f"{prefix}watermark & <meta> 'x'.json")  # escaped in the XML
    for n, key in enumerate(keys):
        assert _request(own_broker, "PUT", urllib.parse.quote(key), b"b" * (n + 1))[0] == 200
    queries = [{"prefix": prefix}, {"prefix": prefix, "delimiter": "/"},
               {"prefix": f"{prefix}records/", "max-keys": "5"},
               {"prefix": prefix, "start-after": keys[3]}, {"prefix": prefix, "max-keys": "0"},
               {"prefix": f"{prefix}nothing/"}]
    for query in queries:
        query = {"list-type": "2", **query}
        assert _listing(own_broker, query) == _listing(own_broker,
                                                       {**query, "encoding-type": "url"})
    page = ElementTree.fromstring(_listing(
        own_broker, {"list-type": "2", "prefix": f"{prefix}records/", "max-keys": "5"}))
    token = page.findtext(f"{_S3}NextContinuationToken") or ""
    query = {"list-type": "2", "prefix": f"{prefix}records/", "max-keys": "5",
             "continuation-token": token}
    assert _listing(own_broker, query) == _listing(own_broker, {**query, "encoding-type": "url"})

    def sizes() -> dict[str, str]:
        listing = ElementTree.fromstring(_listing(own_broker, {"list-type": "2",
                                                               "prefix": prefix}))
        return {c.findtext(f"{_S3}Key") or "": c.findtext(f"{_S3}Size") or ""
                for c in listing.iter(f"{_S3}Contents")}

    assert sizes()[keys[0]] == "1" and sizes()[keys[-1]] == "13"
    assert _request(own_broker, "PUT", keys[0], b"rewritten, longer")[0] == 200
    assert _request(own_broker, "DELETE", keys[1])[0] == 204
    listed = sizes()
    assert listed[keys[0]] == "17" and keys[1] not in listed and len(listed) == 12


def test_the_direct_route_answers_as_s3rvers_whole_chain(own_broker: OwnBroker) -> None:
    """The requests tansu sends skip s3rver's router and the middleware that do nothing for them
    (`directRoute` in s3store.cjs). Sent again with an `Origin` header (which the bucket, having
    no CORS configuration, ignores) a request takes s3rver's whole chain: both answers must be the
    same, errors included."""
    prefix = f"direct/{uuid.uuid4()}"

    def both(method: str, key: str, body: bytes = b"", headers: dict[str, str] | None = None,
             bucket: str = S3_BUCKET) -> tuple[int, bytes, dict[str, str]]:
        sent = {**_signed(body), **(headers or {})}
        answers = []
        for extra in ({"origin": "http://elsewhere.example"}, {}):  # whole chain first
            status, answer, got = _answer(own_broker, method, _path(bucket, key), body,
                                          {**sent, **extra})
            got.pop("date", None)
            answers.append((status, answer, got))
        assert answers[0] == answers[1], (method, key)
        return answers[0]

    # a PUT that succeeds changes the state: each way writes a new key of its own
    written = []
    for extra in ({"origin": "http://elsewhere.example"}, {}):
        key = f"{prefix}/{len(written)}/records/00000000000000000000.batch"
        status, answer, got = _answer(own_broker, "PUT", _path(S3_BUCKET, key), b"batch",
                                      {**_signed(b"batch"), "if-none-match": "*", **extra})
        got.pop("date", None)
        written.append((status, answer, got))
    assert written[0] == written[1]
    status, _, got = written[0]
    assert status == 200 and got["etag"] == f'"{hashlib.md5(b"batch").hexdigest()}"'
    key = f"{prefix}/watermark.json"
    status, _, etag = _request(own_broker, "PUT", key, b"w1", {"If-None-Match": "*"})
    assert status == 200
    assert both("PUT", key, b"w2", {"if-none-match": "*"})[0] == 412
    assert both("PUT", key, b"w2", {"if-match": '"stale"'})[0] == 412
    status, body, got = both("GET", key)
    assert (status, body, got["etag"]) == (200, b"w1", etag)
    assert {"content-type", "last-modified", "accept-ranges", "content-length"} <= set(got)
    assert both("GET", key, headers={"if-none-match": etag})[0] == 304
    assert both("GET", f"{prefix}/missing.json")[0] == 404
    assert both("GET", "x/key.json", bucket="no-such-bucket")[0] == 404
    assert both("GET", key, headers=_signed(access_key="NOBODY"))[0] == 403
    assert both("GET", f"?list-type=2&prefix={prefix}/", bucket=S3_BUCKET)[0] == 200
    assert both("GET", "?list-type=2&max-keys=x", bucket=S3_BUCKET)[0] == 400
    assert both("GET", "?list-type=2", bucket="no-such-bucket")[0] == 404


def test_a_rewrite_keeps_the_object_and_its_metadata_as_a_restart_reads_them(
        own_broker: OwnBroker) -> None:
    """A write keeps the metadata it wrote in memory and leaves metadata.json alone when a
    rewrite has the same metadata (a watermark's): what the store answers after each write must
    be what it reads from its files after a restart."""
    key = f"rewrite/{uuid.uuid4()}/watermark.json"
    _, _, etag = _request(own_broker, "PUT", key, b"v1", {"x-amz-meta-kind": "watermark"})
    for n in range(2, 5):  # same metadata: metadata.json is not rewritten
        status, _, etag = _request(own_broker, "PUT", key, f"v{n}".encode(), {"If-Match": etag,
                                   "x-amz-meta-kind": "watermark"})
        assert status == 200
    status, _, etag = _request(own_broker, "PUT", key, b"v5", {"If-Match": etag,
                               "x-amz-meta-kind": "changed", "content-type": "text/plain"})
    assert status == 200

    def seen() -> tuple[int, bytes, dict[str, str]]:
        status, body, got = _answer(own_broker, "GET", f"/{S3_BUCKET}/{key}",
                                    headers=_signed())
        got.pop("date", None)
        return status, body, got

    before = seen()
    assert before[:2] == (200, b"v5") and before[2]["etag"] == etag
    assert before[2]["x-amz-meta-kind"] == "changed" and before[2]["content-type"] == "text/plain"
    own_broker.store.stop()
    own_broker.store.start()
    assert seen() == before


@pytest.mark.parametrize("signed", [True, False], ids=["direct", "whole-chain"])
def test_a_get_answers_the_bytes_it_read(own_broker: OwnBroker, signed: bool) -> None:
    """A GET that overlaps a rewrite of its key reads the new bytes with the metadata it had
    (the rewrite drops it only when done). s3rver sent the metadata's length and streamed the
    file up to it: new content cut to the old length. Here the file changes behind the store's
    back, as in that window: the answer must be the bytes on disk, with their length and etag."""
    key = f"get/{uuid.uuid4()}/watermark.json"
    assert _request(own_broker, "PUT", key, b"short", signed=signed)[0] == 200
    assert _request(own_broker, "GET", key, signed=signed)[:2] == (200, b"short")  # cached
    name = key.rsplit("/", 1)
    stored = own_broker.store.directory / S3_BUCKET / name[0] / f"{name[1]}._S3rver_object"
    assert stored.read_bytes() == b"short"
    stored.write_bytes(b"rewritten, longer")
    status, body, got = _answer(own_broker, "GET", _path(S3_BUCKET, key),
                                headers=_signed() if signed else {})
    assert (status, body) == (200, b"rewritten, longer")
    assert got["content-length"] == "17"
    assert got["etag"] == f'"{hashlib.md5(b"rewritten, longer").hexdigest()}"'
