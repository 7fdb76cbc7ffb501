"""The broker's S3 store: CPU per request of the requests tansu sends, against stock s3rver's.

tansu's S3 engine sends a few kinds of request, over and over (counted in a `bench/ingest`
run): a PUT of each record batch (`If-None-Match: *`), a PUT of the partition's watermark
(`If-Match: <etag>`), a GET of each batch a fetch reads, a GET of the watermark or the cluster's
metadata that comes back 304 (`If-None-Match: <etag>`), and partition listings
(`bench/broker/s3listing.py`). At a steady, moderate rate the store answers thousands of them a
minute, each costing more CPU than the record it carries, so its CPU per request is what a quiet
deployment pays for.

The baseline is stock s3rver (the same package, `node_modules/s3rver/bin/s3rver.js`, with the
store's command line) in the same run: the store adds conditional writes, atomic renames and an
etag kept beside each object, and should cost no more than the server it patches.

    python -m bench.broker.s3store [--requests 1000] [--rounds 3] [--port 24980]

Two servers of their own on temporary directories, each request signed as tansu signs it
(AWS4-HMAC-SHA256 header, `x-amz-date`, `x-amz-content-sha256`; the signature is not checked,
as the stack runs the store with `--allow-mismatched-signatures`), over one keep-alive
connection each. Per round and request kind, `--requests` requests to one server then the other,
the order alternating between rounds; the servers' CPU from psutil. Prints the median over
rounds of each server's CPU ms per request, the ratio, and PASS/FAIL against at most 1.0x.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from pipeline.services.broker import S3_BUCKET, S3StoreService, project_root
from pipeline.settings import Settings

TARGET = 1.0  # the store's CPU per request / stock s3rver's
PREFIX = "clusters/tansu_cluster/topics/bench/partitions/0000000000"
_ETAG = re.compile(r'"?([0-9a-f]{32})"?')


def signed_headers(body: bytes = b"", access_key: str = "S3RVER",
                   extra: dict[str, str] | None = None) -> dict[str, str]:
    """`extra` and the headers tansu's S3 client signs a request with (AWS4-HMAC-SHA256; the
    store does not check the signature: the stack runs it with `--allow-mismatched-signatures`)."""
    now = time.gmtime()
    headers = {"x-amz-date": time.strftime("%Y%m%dT%H%M%SZ", now),
               "x-amz-content-sha256": hashlib.sha256(body).hexdigest(),
               "accept": "*/*", "user-agent": "object_store/0.13.2", **(extra or {})}
    signed = ";".join(sorted(["host", *(name.lower() for name in headers)]))
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{time.strftime('%Y%m%d', now)}/us-east-1/s3/"
        f"aws4_request, SignedHeaders={signed}, Signature={'0' * 64}")
    return headers


class Server:
    """One S3 server process and one keep-alive connection to it, as tansu's client keeps."""

    def __init__(self, name: str, port: int, pid: int) -> None:
        self.name = name
        self.ps = psutil.Process(pid)
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def request(self, method: str, key: str, body: bytes = b"",
                headers: dict[str, str] | None = None) -> tuple[int, str]:
        """Send one request signed as tansu signs it; (status, etag of the answer)."""
        sent = signed_headers(body, extra=headers)
        path = f"/{S3_BUCKET}{key}" if key.startswith("?") else f"/{S3_BUCKET}/{key}"
        try:
            self.conn.request(method, path, body=body or None, headers=sent)
            resp = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # Node closes a keep-alive connection idle for 5 s (while the other server is
            # measured): connect again, as tansu's client does
            self.conn.close()
            self.conn.request(method, path, body=body or None, headers=sent)
            resp = self.conn.getresponse()
        resp.read()
        if resp.status >= 300 and resp.status != 304:
            raise RuntimeError(f"{self.name}: {method} {key}: {resp.status}")
        return resp.status, resp.headers.get("etag", "")

    def cpu(self) -> tuple[float, float]:
        """(user, system) CPU seconds of the server so far."""
        times = self.ps.cpu_times()
        return times.user, times.system


def start_stock(directory: Path, port: int) -> subprocess.Popen[bytes]:
    """Stock s3rver with the store's command line (`S3StoreService.start`)."""
    node = shutil.which("node")
    assert node is not None, "node is not installed"
    script = project_root() / "node_modules" / "s3rver" / "bin" / "s3rver.js"
    proc = subprocess.Popen([node, str(script),
                             "-d", str(directory), "-a", "127.0.0.1", "-p", str(port), "--silent",
                             "--allow-mismatched-signatures", "--configure-bucket", S3_BUCKET],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/")
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("stock s3rver did not start")


class Kinds:
    """The request kinds, each a function of (server, i) for the i-th request of a round."""

    def __init__(self, batch: bytes, watermark: bytes) -> None:
        self.batch = batch
        self.watermark = watermark
        self.etags: dict[str, str] = {}
        self.round = 0

    def all(self) -> dict[str, Callable[[Server, int], None]]:
        return {"batch PUT (If-None-Match: *)": self.put_batch,
                "watermark PUT (If-Match)": self.put_watermark,
                "batch GET": self.get_batch,
                "watermark GET, 304 (If-None-Match)": self.get_unchanged}

    def _batch_key(self, i: int) -> str:
        return f"{PREFIX}/records/{self.round:08d}{i:012d}.batch"

    def put_batch(self, server: Server, i: int) -> None:
        server.request("PUT", self._batch_key(i), self.batch, {"if-none-match": "*"})

    def put_watermark(self, server: Server, i: int) -> None:
        key = f"{PREFIX}/watermark.json"
        headers = ({"if-match": self.etags[server.name]} if server.name in self.etags
                   else {"if-none-match": "*"})
        status, etag = server.request("PUT", key, self.watermark + str(i).encode(), headers)
        assert status == 200 and _ETAG.fullmatch(etag), (status, etag)
        self.etags[server.name] = etag

    def get_batch(self, server: Server, i: int) -> None:
        status, _ = server.request("GET", self._batch_key(i))
        assert status == 200, status

    def get_unchanged(self, server: Server, i: int) -> None:
        status, _ = server.request("GET", f"{PREFIX}/watermark.json",
                                   headers={"if-none-match": self.etags[server.name]})
        assert status == 304, status


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.broker.s3store",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="per kind, server and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-bytes", type=int, default=4096)
    parser.add_argument("--port", type=int, default=24980)
    args = parser.parse_args()
    kinds = Kinds(os.urandom(args.batch_bytes), b'{"low":0,"high":')
    # per kind and server, per round: (user + system, system) CPU ms per request
    spent: dict[str, dict[str, list[tuple[float, float]]]] = {
        k: {"store": [], "stock": []} for k in kinds.all()}
    with tempfile.TemporaryDirectory(prefix="s3store-") as tmp:
        service = S3StoreService(Settings.model_validate({"data_dir": Path(tmp) / "store",
                                                          "s3_port": args.port}))
        service.start()
        stock_proc = start_stock(Path(tmp) / "stock", args.port + 1)
        try:
            pid = service.running_pid()
            assert pid is not None
            servers = [Server("store", args.port, pid),
                       Server("stock", args.port + 1, stock_proc.pid)]
            for server in servers:  # warm: the connection, the bucket, the watermark's etag,
                kinds.put_watermark(server, 0)  # and the partition listed once, as tansu does
                server.request("GET", f"?list-type=2&prefix={PREFIX}/records/")
            for round_ in range(args.rounds):
                kinds.round = round_
                order = servers if round_ % 2 == 0 else servers[::-1]
                for kind, send in kinds.all().items():
                    for server in order:
                        user, system = server.cpu()
                        for i in range(args.requests):
                            send(server, i)
                        user_after, system_after = server.cpu()
                        per = 1000 / args.requests
                        total = (user_after - user + system_after - system) * per
                        spent[kind][server.name].append((total, (system_after - system) * per))
                        print(f"round {round_ + 1}, {kind}, {server.name}: {total:.3f} ms",
                              file=sys.stderr)
        finally:
            service.stop()
            stock_proc.terminate()
            stock_proc.wait(10)
    print(f"## bench/broker/s3store.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print(f"Command: python -m bench.broker.s3store --requests {args.requests}"
          f" --rounds {args.rounds} --batch-bytes {args.batch_bytes}"
          f" (1-min load {psutil.getloadavg()[0]:.2f} at the end)\n")
    print("| request | the store, CPU ms per request (system) | stock s3rver, CPU ms per request"
          " (system) | ratio | target | result |")
    print("|---|---:|---:|---:|---|---|")
    for kind, by_server in spent.items():
        store = statistics.median(t for t, _ in by_server["store"])
        stock = statistics.median(t for t, _ in by_server["stock"])
        store_sys = statistics.median(s for _, s in by_server["store"])
        stock_sys = statistics.median(s for _, s in by_server["stock"])
        ratio = store / stock if stock else float("inf")
        result = "PASS" if ratio <= TARGET else "FAIL"
        print(f"| {kind} | {store:.3f} ({store_sys:.3f}) | {stock:.3f} ({stock_sys:.3f}) |"
              f" {ratio:.2f} | <= {TARGET} | {result} |")
    print(f"\nMedians over {args.rounds} rounds of {args.requests} requests per kind and server;"
          " (system): the kernel's part (file creation, mostly), which varies from round to round"
          " for both servers alike. psutil counts CPU in 10 ms ticks.")


if __name__ == "__main__":
    main()
