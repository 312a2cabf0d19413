"""An S3-compatible bucket, through boto3: the only module that speaks to a server.

A remote's URL is ``s3://bucket/prefix``; ``endpoint`` points at a server
other than AWS (MinIO, Ceph RGW, R2, B2, a local test server).
Credentials come from boto3's standard chain (``AWS_ACCESS_KEY_ID``,
``~/.aws/credentials``, ``AWS_PROFILE``, instance roles). Slow and failing
requests are retried by botocore's "standard" mode: up to 5 attempts with
exponential backoff and jitter, on throttling, 5xx answers and dropped
connections; each waits 5 s to connect and 20 s for an answer. What still
fails is one ``RemoteError`` line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from earshot.cas import faults
from earshot.cas.errors import EarshotError

#: Attempts per request, botocore's "standard" retry mode (backoff with jitter),
#: and how long one waits: a server that accepts and never answers fails in
#: about 5 x 20 s, not in minutes per request.
MAX_ATTEMPTS = 5
CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_S = 20


class RemoteError(EarshotError):
    """A request the server refused or never answered, after retries."""

    def __init__(self, url: str, why: str) -> None:
        super().__init__(f"{url}: {why}")


#: Every name earshot writes under the prefix: a folder, then hex (and "-").
#: A listed name that is not one is someone else's file, and is passed over:
#: names become local cache paths, so ``..`` must never get through.
SAFE_NAME = re.compile(r"[a-z]+(/[0-9a-f][0-9a-f-]*)+\Z")


@dataclass(frozen=True, slots=True)
class Listed:
    """A file on the remote: its name under the prefix, size and age."""

    name: str
    size: int
    modified_s: float


def parse_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` -> (bucket, prefix with no slash at either end)."""
    parts = urlparse(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise RemoteError(url, "not a remote URL (write s3://BUCKET/PREFIX)")
    return parts.netloc, parts.path.strip("/")


class Storage:
    """One bucket and prefix; names are relative to the prefix."""

    def __init__(self, url: str, endpoint: str | None = None) -> None:
        import boto3  # type: ignore[import-untyped]
        from botocore.config import Config  # type: ignore[import-untyped]

        self.url = url
        self.bucket, self.prefix = parse_url(url)
        config = Config(
            retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"},
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=READ_TIMEOUT_S,
            s3={"addressing_style": "path"} if endpoint else None,
        )
        try:
            self._s3: Any = boto3.client("s3", endpoint_url=endpoint or None, config=config)
        except Exception as exc:  # a bad endpoint, a bad profile: all boto3 has to say
            raise RemoteError(url, _why(exc)) from None

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def put(self, name: str, data: bytes) -> None:
        faults.point("remote-put")
        self._call("put_object", Bucket=self.bucket, Key=self._key(name), Body=data)

    def get(self, name: str) -> bytes | None:
        """The file's bytes, or None if the remote has no file of that name."""
        try:
            answer = self._s3.get_object(Bucket=self.bucket, Key=self._key(name))
            return bytes(answer["Body"].read())
        except Exception as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                return None
            raise RemoteError(self.url, f"reading {name}: {_why(exc)}") from None

    def get_range(self, name: str, offset: int, length: int) -> bytes | None:
        try:
            answer = self._s3.get_object(
                Bucket=self.bucket,
                Key=self._key(name),
                Range=f"bytes={offset}-{offset + length - 1}",
            )
            return bytes(answer["Body"].read())
        except Exception as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                return None
            raise RemoteError(self.url, f"reading {name}: {_why(exc)}") from None

    def listing(self, folder: str) -> Iterator[Listed]:
        """Every file under ``folder/`` (names relative to the prefix)."""
        start = self._key(folder.rstrip("/") + "/")
        cut = len(self.prefix) + 1 if self.prefix else 0
        try:
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=start
            )
            for page in pages:
                for item in page.get("Contents", []):
                    name = item["Key"][cut:]
                    if SAFE_NAME.match(name):  # else not earshot's: never used as a path
                        yield Listed(name, int(item["Size"]), item["LastModified"].timestamp())
        except RemoteError:
            raise
        except Exception as exc:
            raise RemoteError(self.url, f"listing {folder}: {_why(exc)}") from None

    def delete(self, names: list[str]) -> None:
        for start in range(0, len(names), 1000):
            faults.point("remote-delete")
            chunk = names[start : start + 1000]
            objects = [{"Key": self._key(n)} for n in chunk]
            answer = self._call(
                "delete_objects", Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True}
            )
            errors = answer.get("Errors") or []
            if errors:
                first = errors[0]
                raise RemoteError(self.url, f"deleting {first.get('Key')}: {first.get('Message')}")

    def check_bucket(self) -> None:
        """That the bucket answers (a clear error for a wrong name or endpoint)."""
        self._call("head_bucket", Bucket=self.bucket)

    def _call(self, method: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._s3, method)(**kwargs)
        except Exception as exc:
            raise RemoteError(self.url, _why(exc)) from None


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def _why(exc: BaseException) -> str:
    code = _code(exc)
    if code in ("NoSuchBucket", "404"):
        return "no such bucket (create it first, or check the URL and --endpoint)"
    if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        return f"access denied ({code}): check the AWS credentials"
    name = type(exc).__name__
    if name == "NoCredentialsError":
        return "no AWS credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile)"
    text = str(exc).splitlines()[0] if str(exc) else name
    return f"{text} (after {MAX_ATTEMPTS} attempts)" if "connect" in text.lower() else text
