"""The thin client's JSON, from the interpreter's C modules: it must read and write
exactly what the json module does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from earshot.cli import lean

documents = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(documents)
@example({"path": "a\udcffb", "cmd": 'echo "x"\\n\u2028'})
def test_dumps_is_read_back_by_json_and_loads_reads_what_json_writes(doc: Any) -> None:
    assert json.loads(lean.dumps(doc)) == doc
    assert lean.loads(json.dumps(doc)) == doc
    assert lean.loads(f" \n{json.dumps(doc, indent=2)}\n ") == doc


@pytest.mark.parametrize("text", ["", "   ", "{", "{not json", '{"a": 1', "[1,]", "{} {}", "nul"])
def test_what_is_not_one_json_document_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        lean.loads(text)
