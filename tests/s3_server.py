"""A real S3-protocol server on 127.0.0.1 for the remote's tests: moto's standalone server.

``S3Server`` starts ``python -m moto.server`` on a free port, waits until it
answers, and gives the environment a client needs (test credentials, no
proxy); ``stop``/``start`` kill it and bring it back empty (moto keeps its
buckets in memory), ``kill`` cuts it mid-request. Traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class S3Server:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> S3Server:
        env = {**os.environ, **CREDENTIALS}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:  # a guard: the loop ends on the server's first answer
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto's S3 server did not start") from None
                time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def client(self) -> Any:
        import boto3

        for key, value in CREDENTIALS.items():
            os.environ.setdefault(key, value)
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )

    def make_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def objects(self, bucket: str) -> dict[str, bytes]:
        """Every object in the bucket, by key, with its bytes."""
        s3 = self.client()
        out = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                out[item["Key"]] = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        return out

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client().put_object(Bucket=bucket, Key=key, Body=data)


class CuttingProxy:
    """A TCP proxy before the server that cuts connections mid-request: the
    first ``first`` connections through which more than ``after`` bytes of
    requests pass are closed there (a dropped connection, a server gone
    mid-upload); later ones pass. ``cuts`` counts them."""

    def __init__(self, target_port: int, first: int = 2, after: int = 64 << 10) -> None:
        import threading

        self.target_port = target_port
        self.first = first
        self.after = after
        self.cuts = 0
        self.connections = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = int(self._sock.getsockname()[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import threading

        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        import selectors

        upstream = socket.create_connection(("127.0.0.1", self.target_port))
        sent = 0
        sel = selectors.DefaultSelector()
        sel.register(client, selectors.EVENT_READ, upstream)
        sel.register(upstream, selectors.EVENT_READ, client)
        try:
            while True:
                for key, _ in sel.select(timeout=30):
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    if key.fileobj is client:
                        sent += len(data)
                        with self._lock:
                            cut = sent > self.after and self.cuts < self.first
                            self.cuts += cut
                        if cut:
                            return
                    key.data.sendall(data)
        except OSError:
            return
        finally:
            sel.close()
            client.close()
            upstream.close()

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
