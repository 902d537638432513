"""PUT-while-LIST probe of an S3 server: does a LIST ever leave out objects that are there?

Writer threads PUT fresh keys (``If-None-Match: *``, as the Delta log store commits) into one
prefix that already holds ``--stable`` objects, while lister threads LIST that prefix with
delimiter ``/`` (as S3A lists a ``_delta_log/`` directory) in a loop. A listing is *short* when it
misses a stable key, or a key whose PUT was answered before the LIST was sent. A correct server
gives none; S3Proxy 4.0.0's nio2 backend truncates a listing when an upload's temp file (written
next to its key) vanishes between the directory read and its stat.

    scripts/local_s3.sh start > /tmp/s3.env       # or any server: S3_ENDPOINT, S3_BUCKET, AWS_* in the env
    .venv/bin/python scripts/s3_list_probe.py --settings /tmp/s3.env [--seconds 60]

Plain HTTP with AWS Signature V4 (standard library only). Prints one summary line and exits 1 if
any listing was short.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import hmac
import http.client
import os
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from urllib.parse import quote, urlparse

S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class S3:
    """A tiny S3 client: one keep-alive HTTP connection, requests signed with SigV4."""

    def __init__(self, endpoint: str, access: str, secret: str, region: str = "us-east-1"):
        url = urlparse(endpoint)
        self.host, self.port = url.hostname, url.port or 80
        self.access, self.secret, self.region = access, secret, region
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)

    def _headers(self, method: str, path: str, query: dict[str, str], body: bytes, extra: dict[str, str]):
        now = datetime.datetime.now(datetime.timezone.utc)
        stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        digest = hashlib.sha256(body).hexdigest()
        headers = {"host": f"{self.host}:{self.port}", "x-amz-date": stamp, "x-amz-content-sha256": digest}
        headers.update({k.lower(): v for k, v in extra.items()})
        names = sorted(headers)
        canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query.items()))
        request = "\n".join([method, quote(path, safe="/-_.~"), canonical_query,
                             "".join(f"{n}:{headers[n].strip()}\n" for n in names), ";".join(names), digest])
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(request.encode()).hexdigest()])
        key = ("AWS4" + self.secret).encode()
        for part in (day, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={self.access}/{scope}, "
                                    f"SignedHeaders={';'.join(names)}, Signature={signature}")
        return headers, canonical_query

    def request(self, method: str, path: str, query: dict[str, str] | None = None, body: bytes = b"",
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        signed, canonical_query = self._headers(method, path, query or {}, body, headers or {})
        target = quote(path, safe="/-_.~") + (f"?{canonical_query}" if canonical_query else "")
        for attempt in range(2):  # once more on a dropped keep-alive connection
            try:
                self.conn.request(method, target, body=body, headers=signed)
                response = self.conn.getresponse()
                return response.status, response.read()
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def put_if_absent(self, bucket: str, key: str, body: bytes) -> int:
        return self.request("PUT", f"/{bucket}/{key}", body=body, headers={"If-None-Match": "*"})[0]

    def list_keys(self, bucket: str, prefix: str) -> set[str]:
        """Every key directly under ``prefix`` (delimiter ``/``), all pages."""
        keys: set[str] = set()
        token = None
        while True:
            query = {"list-type": "2", "prefix": prefix, "delimiter": "/"}
            if token:
                query["continuation-token"] = token
            status, body = self.request("GET", f"/{bucket}", query)
            if status != 200:
                raise RuntimeError(f"LIST {prefix}: HTTP {status}: {body[:300]!r}")
            tree = ET.fromstring(body)
            keys.update(e.text for e in tree.iter(f"{S3_NS}Key"))
            if tree.findtext(f"{S3_NS}IsTruncated") != "true":
                return keys
            token = tree.findtext(f"{S3_NS}NextContinuationToken")


def read_settings(path: str | None) -> dict[str, str]:
    settings = dict(os.environ)
    if path:
        for line in open(path):
            if "=" in line and not line.startswith("spark."):
                k, v = line.rstrip("\n").split("=", 1)
                settings[k] = v
    return settings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", help="KEY=value lines of scripts/local_s3.sh start (else the environment)")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--stable", type=int, default=60, help="objects in the prefix before the run")
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--listers", type=int, default=2)
    parser.add_argument("--size", type=int, default=2000, help="bytes per PUT")
    parser.add_argument("--pause", type=float, default=0.02,
                        help="seconds each writer waits between PUTs (keeps the prefix, and a LIST, small)")
    args = parser.parse_args()
    s = read_settings(args.settings)
    endpoint, bucket = s["S3_ENDPOINT"], s["S3_BUCKET"]
    client = lambda: S3(endpoint, s["AWS_ACCESS_KEY_ID"], s["AWS_SECRET_ACCESS_KEY"])  # noqa: E731
    prefix = f"list-probe/{uuid.uuid4().hex[:12]}/_delta_log/"
    setup = client()
    stable = {f"{prefix}{v:020d}.json" for v in range(args.stable)}
    for key in sorted(stable):
        status = setup.put_if_absent(bucket, key, b"x" * args.size)
        if status != 200:
            raise SystemExit(f"PUT {key}: HTTP {status}")
    if setup.list_keys(bucket, prefix) != stable:
        raise SystemExit("the first listing already differs from the keys written")

    acknowledged: set[str] = set()  # keys whose PUT was answered 200
    lock = threading.Lock()
    stop = time.monotonic() + args.seconds
    counts = {"puts": 0, "lists": 0, "short": 0, "short_stable": 0, "max_missing": 0, "errors": 0}
    samples: list[str] = []

    def writer(w: int) -> None:
        c, n = client(), 0
        while time.monotonic() < stop:
            key = f"{prefix}{args.stable + 1_000_000 * (w + 1) + n:020d}.json"
            n += 1
            status = c.put_if_absent(bucket, key, os.urandom(args.size))
            time.sleep(args.pause)
            with lock:
                counts["puts"] += 1
                if status == 200:
                    acknowledged.add(key)
                else:
                    counts["errors"] += 1

    def lister() -> None:
        c = client()
        while time.monotonic() < stop:
            with lock:
                expected = stable | acknowledged
            try:
                listed = c.list_keys(bucket, prefix)
            except RuntimeError as exc:
                with lock:
                    counts["errors"] += 1
                    samples.append(str(exc))
                continue
            missing = expected - listed
            with lock:
                counts["lists"] += 1
                if missing:
                    counts["short"] += 1
                    counts["short_stable"] += bool(missing & stable)
                    counts["max_missing"] = max(counts["max_missing"], len(missing))
                    if len(samples) < 3:
                        samples.append(f"listed {len(listed)} keys, {len(missing)} missing, e.g. {min(missing)}")

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(args.writers)]
    threads += [threading.Thread(target=lister) for _ in range(args.listers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"endpoint {endpoint}: {counts['lists']} listings, {counts['short']} short "
          f"({counts['short_stable']} missing a stable key; at most {counts['max_missing']} keys missing), "
          f"{counts['puts']} PUTs, {counts['errors']} errors, {args.seconds:.0f} s")
    for line in samples:
        print("  " + line)
    return 1 if counts["short"] or counts["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
