"""The broker's S3 store: CPU of one partition listing, rendered by the store against s3rver's own.

tansu lists every batch object of a partition on each fetch that returns records, so a listing's
cost is paid per fetch and grows with the partition. The store renders ListObjectsV2 itself
(`pipeline/services/s3store.cjs`, `fastListing`); s3rver's handler, which the store still uses for
every other kind of listing, is the baseline: the same listing with `encoding-type=url` (which
s3rver ignores) goes through it, on the same store, in the same run, and answers the same bytes.

    python -m bench.broker.s3listing [--keys 200,1000,3000] [--listings 100] [--port 24990]

A store of its own on a temporary directory; N batch objects are written per prefix, then each
prefix is listed from its start to its end (1,000 keys a page, as tansu pages) `--listings` times
each way, alternating. Prints the store's CPU per whole listing (psutil, the store's process)
and the ratio, with PASS/FAIL against a target of at most half s3rver's CPU at 1,000 keys or more.
"""

from __future__ import annotations

import argparse
import http.client
import re
import tempfile
import time
import urllib.parse
from pathlib import Path

import psutil

from pipeline.services.broker import S3_BUCKET, S3StoreService
from pipeline.settings import Settings

TARGET = 0.5  # rendered / s3rver's, at 1,000 keys or more
_TOKEN = re.compile(rb"<NextContinuationToken>([^<]+)</NextContinuationToken>")


class Store:
    """The broker's S3 store (`S3StoreService`, as the stack starts it) on a directory of this
    benchmark, and one keep-alive connection to it (as tansu's)."""

    def __init__(self, directory: Path, port: int) -> None:
        self.service = S3StoreService(Settings.model_validate({"data_dir": directory,
                                                               "s3_port": port}))
        self.service.start()
        pid = self.service.running_pid()
        assert pid is not None
        self.ps = psutil.Process(pid)
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def request(self, method: str, path: str, body: bytes = b"") -> bytes:
        self.conn.request(method, path, body=body)
        resp = self.conn.getresponse()
        data = resp.read()
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: {resp.status} {data[:200]!r}")
        return data

    def cpu(self) -> float:
        times = self.ps.cpu_times()
        return times.user + times.system

    def list_all(self, prefix: str, extra: dict[str, str]) -> int:
        """List `prefix` from its start to its end, page by page; the keys listed."""
        keys, token = 0, None
        while True:
            query = {"list-type": "2", "prefix": prefix, **extra}
            if token is not None:
                query["continuation-token"] = token
            page = self.request("GET", f"/{S3_BUCKET}?" + urllib.parse.urlencode(query))
            keys += page.count(b"<Key>")
            found = _TOKEN.search(page)
            if found is None:
                return keys
            token = found.group(1).decode()

    def stop(self) -> None:
        self.service.stop()


def measure(store: Store, prefix: str, listings: int) -> tuple[float, float, int]:
    """CPU ms per whole listing: (rendered by the store, s3rver's), alternating; keys listed."""
    spent = {"rendered": 0.0, "s3rver": 0.0}
    ways = {"rendered": {}, "s3rver": {"encoding-type": "url"}}
    keys = 0
    for extra in ways.values():  # warm: metadata read once, elements rendered once
        keys = store.list_all(prefix, extra)
    for _ in range(listings):
        for name, extra in ways.items():
            before = store.cpu()
            store.list_all(prefix, extra)
            spent[name] += store.cpu() - before
    return (1000 * spent["rendered"] / listings, 1000 * spent["s3rver"] / listings, keys)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.broker.s3listing",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--keys", default="200,1000,3000")
    parser.add_argument("--listings", type=int, default=100)
    parser.add_argument("--port", type=int, default=24990)
    args = parser.parse_args()
    sizes = [int(k) for k in args.keys.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="s3listing-") as tmp:
        store = Store(Path(tmp), args.port)
        try:
            for size in sizes:
                prefix = f"topics/t{size}/partitions/0000000000/records/"
                for offset in range(size):
                    store.request("PUT", f"/{S3_BUCKET}/{prefix}{offset:020d}.batch", b"b" * 2048)
                rendered, s3rver, keys = measure(store, prefix, args.listings)
                assert keys == size, (keys, size)
                rows.append((size, rendered, s3rver))
        finally:
            store.stop()
    print(f"## bench/broker/s3listing.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print(f"Command: python -m bench.broker.s3listing --keys {args.keys} --listings {args.listings}"
          f" (1-min load {psutil.getloadavg()[0]:.2f} at the end)\n")
    print("| batch objects in the partition | rendered by the store, CPU ms per listing |"
          " s3rver's handler, CPU ms | ratio | target | result |")
    print("|---:|---:|---:|---:|---|---|")
    for size, rendered, s3rver in rows:
        ratio = rendered / s3rver if s3rver else float("inf")
        target = f"<= {TARGET}" if size >= 1000 else "-"
        result = ("PASS" if ratio <= TARGET else "FAIL") if size >= 1000 else "-"
        print(f"| {size:,} | {rendered:.2f} | {s3rver:.2f} | {ratio:.2f} | {target} | {result} |")


if __name__ == "__main__":
    main()
