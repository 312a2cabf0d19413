"""Every byte that leaves the machine is encrypted and authenticated here.

A remote has one *master key*, made at random when the remote is first
used: 32 bytes for AES-256-GCM (``cryptography``'s ``AESGCM``, never code
of our own) and 32 bytes for keyed names. It is stored on the remote only
wrapped, in ``keys/<id>``: encrypted under a key derived by scrypt from the
person's passphrase or key file. Losing both the passphrase and the key file
loses the remote's content: nothing else can open it (README).

Each sealed message is ``nonce (12 random bytes) || ciphertext || tag`` with
associated data binding it to what it claims to be (an object's digest, a
file's kind), so an object moved or swapped on the server is refused as
tampered, not read as another. Random 96-bit nonces are safe up to about
2^32 messages under one key; a remote reaching that many objects is far
beyond what this tool stores.

Names the server sees never show content: a pack or index is named by the
BLAKE3 of its ciphertext, a session's references by a keyed BLAKE3 of its id.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

import blake3
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from earshot.cas.errors import EarshotError

NONCE_SIZE = 12
TAG_SIZE = 16
KEY_SIZE = 32
#: scrypt's cost: about 0.1 s and 32 MiB here, once per command.
SCRYPT_N = 1 << 15
SCRYPT_R = 8
SCRYPT_P = 1
_NAME_CONTEXT = "earshot 2026 remote keyed name v1"


class WrongKey(EarshotError):
    """The passphrase or key file opens none of the remote's keys."""

    def __init__(self, where: str) -> None:
        super().__init__(
            f"{where}: the passphrase or key file does not open this remote "
            "(no key there matches it); nothing was changed"
        )


class Tampered(EarshotError):
    """A remote file that does not authenticate: damaged or changed on the server."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} on the remote does not authenticate (damaged or changed on the "
            "server); nothing was taken from it. Run 'earshot fsck --remote NAME'"
        )


@dataclass(frozen=True, slots=True)
class MasterKey:
    """The remote's keys: one encrypts, the other names."""

    encrypt: bytes
    name: bytes

    @staticmethod
    def new() -> MasterKey:
        return MasterKey(os.urandom(KEY_SIZE), os.urandom(KEY_SIZE))

    def seal(self, plain: bytes, aad: bytes) -> bytes:
        nonce = os.urandom(NONCE_SIZE)
        return nonce + AESGCM(self.encrypt).encrypt(nonce, plain, aad)

    def open(self, sealed: bytes, aad: bytes, what: str) -> bytes:
        if len(sealed) < NONCE_SIZE + TAG_SIZE:
            raise Tampered(what)
        try:
            return AESGCM(self.encrypt).decrypt(sealed[:NONCE_SIZE], sealed[NONCE_SIZE:], aad)
        except InvalidTag:
            raise Tampered(what) from None

    def keyed_name(self, text: str) -> str:
        """A name for ``text`` the server cannot reverse or guess (a session id)."""
        hasher = blake3.blake3(key=self.name)
        hasher.update(_NAME_CONTEXT.encode())
        hasher.update(text.encode())
        return hasher.hexdigest()[:32]


def content_name(sealed: bytes) -> str:
    """The name of an immutable remote file: BLAKE3 of its ciphertext."""
    return blake3.blake3(sealed).hexdigest()


def _sane(n: int, r: int, p: int) -> bool:
    """scrypt costs a key file may ask for: a power of two, at most 128 MiB
    and a few seconds, so a planted key file cannot stall or crash a command."""
    return (
        1 << 10 <= n <= 1 << 20
        and n & (n - 1) == 0
        and 1 <= r <= 16
        and 1 <= p <= 4
        and 128 * n * r <= 128 << 20
    )


def _kek(secret: bytes, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(secret, salt=salt, n=n, r=r, p=p, maxmem=256 << 20, dklen=KEY_SIZE)


def wrap(master: MasterKey, secret: bytes) -> bytes:
    """``keys/<id>``: the master key under a key derived from ``secret``."""
    salt = os.urandom(16)
    kek = _kek(secret, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    nonce = os.urandom(NONCE_SIZE)
    body = AESGCM(kek).encrypt(nonce, master.encrypt + master.name, b"earshot key")
    doc = {
        "kdf": "scrypt",
        "n": SCRYPT_N,
        "r": SCRYPT_R,
        "p": SCRYPT_P,
        "salt": base64.b64encode(salt).decode(),
        "data": base64.b64encode(nonce + body).decode(),
    }
    return json.dumps(doc, sort_keys=True).encode()


def unwrap(doc_bytes: bytes, secret: bytes) -> MasterKey | None:
    """The master key a ``keys/<id>`` file holds, if ``secret`` opens it; else None."""
    try:
        doc: Any = json.loads(doc_bytes)
        salt = base64.b64decode(doc["salt"])
        data = base64.b64decode(doc["data"])
        n, r, p = int(doc["n"]), int(doc["r"]), int(doc["p"])
        if doc.get("kdf") != "scrypt" or not _sane(n, r, p):
            return None
        kek = _kek(secret, salt, n, r, p)
    except (ValueError, KeyError, TypeError, OverflowError, MemoryError):
        return None  # a key file planted or damaged on the server opens nothing
    try:
        plain = AESGCM(kek).decrypt(data[:NONCE_SIZE], data[NONCE_SIZE:], b"earshot key")
    except (InvalidTag, ValueError):
        return None
    if len(plain) != 2 * KEY_SIZE:
        return None
    return MasterKey(plain[:KEY_SIZE], plain[KEY_SIZE:])


def new_key_file(path: str) -> None:
    """A key file: 32 random bytes, base64, readable by its owner alone."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(base64.b64encode(os.urandom(KEY_SIZE)).decode() + "\n")
        out.flush()
        os.fsync(out.fileno())
