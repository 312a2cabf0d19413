"""Fuzzing helpers: damaged encodings, arbitrary JSON, and example counts scaled to a test's cost.

A decoder fed random bytes mostly meets its first check (a magic number, a
checksum) and stops there; fed a valid encoding with a few bytes flipped,
cut or inserted it goes deep, where the bugs are. So each fuzz test draws
from ``damaged(valid)``: random bytes, or a valid encoding mutated.

How many examples a test runs comes from the Hypothesis profile
(tests/conftest.py): "ci" by default, fixed and quick; "long" with
``EARSHOT_FUZZ=long`` (``python -m benchmarks run --only fuzz``), forty
times as many, new ones each run. ``examples(scale)`` scales the profile's
count for one test: a decoder that runs in microseconds takes more examples
than a test that starts a process for each.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st


def examples(scale: float) -> settings:
    """The loaded profile's example count times ``scale`` (at least 2)."""
    count = max(2, round(settings.default.max_examples * scale))
    # Generating a damaged encoding costs more than decoding it: not too slow.
    return settings(max_examples=count, suppress_health_check=[HealthCheck.too_slow])


#: Scalars JSON holds, with the ones decoders forget: huge integers, NaN, infinities.
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from([2**64, -1, 0, 1e999, -1e999, "", "0" * 64])
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def mutated(draw: st.DrawFn, valid: st.SearchStrategy[bytes], most: int = 4) -> bytes:
    """A valid encoding with 1..``most`` edits: a bit flipped, a byte set, bytes
    inserted, deleted or repeated, or the end cut off."""
    data = bytearray(draw(valid))
    for _ in range(draw(st.integers(1, most))):
        edit = draw(st.sampled_from(["flip", "set", "insert", "delete", "repeat", "cut"]))
        at = draw(st.integers(0, len(data)))
        if edit == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif edit == "set" and at < len(data):
            data[at] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]) | st.integers(0, 255))
        elif edit == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif edit == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        elif edit == "repeat":
            data[at:at] = data[at : at + draw(st.integers(1, 16))]
        elif edit == "cut":
            del data[at:]
    return bytes(data)


def damaged(valid: st.SearchStrategy[bytes], max_size: int = 200) -> st.SearchStrategy[bytes]:
    """Random bytes, or (mostly) a valid encoding mutated."""
    return st.binary(max_size=max_size) | mutated(valid) | mutated(valid)


@st.composite
def mutated_doc(draw: st.DrawFn, valid: st.SearchStrategy[Any], most: int = 3) -> Any:
    """A valid JSON document with 1..``most`` edits, each at a random depth: a
    value replaced by any JSON value, a key dropped, or a key added."""
    doc = copy.deepcopy(draw(valid))
    for _ in range(draw(st.integers(1, most))):
        doc = _edit(draw, doc)
    return doc


def _edit(draw: st.DrawFn, value: Any) -> Any:
    if isinstance(value, dict) and value and draw(st.integers(0, 3)):
        key = draw(st.sampled_from(sorted(value)))
        edit = draw(st.sampled_from(["descend", "descend", "drop", "add"]))
        if edit == "drop":
            del value[key]
        elif edit == "add":
            value[draw(st.text(max_size=8))] = draw(json_values)
        else:
            value[key] = _edit(draw, value[key])
        return value
    if isinstance(value, list) and value and draw(st.integers(0, 3)):
        index = draw(st.integers(0, len(value) - 1))
        value[index] = _edit(draw, value[index])
        return value
    return draw(json_values)


def json_bytes(doc: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """A document's JSON text (``Infinity`` and ``NaN`` as Python writes them)."""
    return doc.map(lambda d: json.dumps(d).encode())


#: Nesting no record has: json and marshal give up on it with RecursionError.
DEEP_JSON = b"[" * 10_000
