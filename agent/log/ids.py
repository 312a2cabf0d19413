"""Time-ordered ids for sessions and entries, and resolution of id prefixes.

An id is 26 lowercase Crockford base32 characters::

    tttttttttt cccc rrrrrrrrrrrr
    10 chars   4    12 chars
    48-bit ms  20-bit counter   60 random bits

The millisecond clock comes first and the per-process counter second, so ids
made by one process sort in creation order even within one millisecond (and
even if the wall clock steps back: the clock used never decreases). The random
tail keeps ids made by different processes in the same millisecond apart.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import NewType, TypeVar

from earshot.cas.errors import EarshotError

SessionId = NewType("SessionId", str)
EntryId = NewType("EntryId", str)

ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
ID_LENGTH = 26
_TIME_CHARS = 10
_COUNTER_CHARS = 4
_RANDOM_CHARS = 12
_COUNTER_LIMIT = 1 << (5 * _COUNTER_CHARS)
_RANDOM_SHIFT = 64 - 5 * _RANDOM_CHARS

# Two characters per lookup: encoding is on the append path.
_PAIRS = [a + b for a in ALPHABET for b in ALPHABET]
_VALID = frozenset(ALPHABET)
# Crockford's reading aids: letters a person may type for digits they look like.
_ALIASES = str.maketrans({"i": "1", "l": "1", "o": "0"})


def _encode(value: int, chars: int) -> str:
    """``value`` as ``chars`` base32 characters (``chars`` even)."""
    out = []
    for _ in range(chars // 2):
        out.append(_PAIRS[value & 0x3FF])
        value >>= 10
    return "".join(reversed(out))


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class IdGenerator:
    """Makes ids that sort in the order they were made, from any thread."""

    def __init__(self, clock: Callable[[], int] = _wall_ms) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._ms = -1
        self._counter = 0
        self._prefix = ""

    def reset_after_fork(self) -> None:
        # A lock held by another thread at fork time would never be released.
        self._lock = threading.Lock()

    def new(self) -> str:
        """A fresh id, greater than every id this generator made before."""
        with self._lock:
            now = self._clock()
            if now > self._ms:
                self._ms = now
                self._counter = 0
                self._prefix = _encode(now, _TIME_CHARS)
            else:
                self._counter += 1
                if self._counter == _COUNTER_LIMIT:
                    # A million ids in one millisecond: borrow the next one.
                    self._ms += 1
                    self._counter = 0
                    self._prefix = _encode(self._ms, _TIME_CHARS)
            prefix, counter = self._prefix, self._counter
        tail = int.from_bytes(os.urandom(8), "big") >> _RANDOM_SHIFT
        return prefix + _encode(counter, _COUNTER_CHARS) + _encode(tail, _RANDOM_CHARS)


_GENERATOR = IdGenerator()
os.register_at_fork(after_in_child=_GENERATOR.reset_after_fork)


def new_session_id() -> SessionId:
    """A new session id."""
    return SessionId(_GENERATOR.new())


def new_entry_id() -> EntryId:
    """A new entry id."""
    return EntryId(_GENERATOR.new())


def is_id(text: str) -> bool:
    """Whether ``text`` has the shape of an earshot id."""
    return len(text) == ID_LENGTH and _VALID.issuperset(text)


def id_time_ms(ident: str) -> int:
    """The millisecond timestamp an id was made at."""
    value = 0
    for char in ident[:_TIME_CHARS]:
        value = value * 32 + ALPHABET.index(char)
    return value


def normalize_prefix(prefix: str) -> str:
    """A typed prefix in canonical form: trimmed, lowercase, Crockford aliases mapped."""
    return prefix.strip().lower().translate(_ALIASES)


class IdPrefixError(EarshotError):
    """A prefix that does not name exactly one id."""

    def __init__(self, message: str, prefix: str, what: str) -> None:
        super().__init__(message)
        self.prefix = prefix
        self.what = what


class NoMatchingId(IdPrefixError):
    """No id starts with the prefix."""

    def __init__(self, prefix: str, what: str = "id") -> None:
        shown = prefix or "(empty)"
        super().__init__(f"no {what} starts with {shown!r}", prefix, what)


class AmbiguousId(IdPrefixError):
    """More than one id starts with the prefix."""

    def __init__(self, prefix: str, matches: tuple[str, ...], what: str = "id") -> None:
        listed = ", ".join(matches[:5]) + (", …" if len(matches) > 5 else "")
        super().__init__(
            f"{what} prefix {prefix!r} matches {len(matches)}: {listed}; type more characters",
            prefix,
            what,
        )
        self.matches = matches


IdT = TypeVar("IdT", bound=str)


def resolve_prefix(candidates: Iterable[IdT], prefix: str, what: str = "id") -> IdT:
    """The one candidate that ``prefix`` starts (an exact match always wins).

    Raises ``NoMatchingId`` (also for an empty prefix) or ``AmbiguousId``.
    """
    wanted = normalize_prefix(prefix)
    if not wanted:
        raise NoMatchingId(prefix, what)
    matches: list[IdT] = []
    for candidate in candidates:
        if candidate == wanted:
            return candidate
        if candidate.startswith(wanted):
            matches.append(candidate)
    if not matches:
        raise NoMatchingId(prefix, what)
    if len(matches) > 1:
        raise AmbiguousId(prefix, tuple(sorted(matches)), what)
    return matches[0]
