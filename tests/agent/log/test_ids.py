"""Time-ordered ids and prefix resolution."""

from __future__ import annotations

import subprocess
import sys

import pytest

from earshot.agent.log import ids
from earshot.agent.log.ids import (
    ALPHABET,
    ID_LENGTH,
    AmbiguousId,
    IdGenerator,
    NoMatchingId,
    id_time_ms,
    is_id,
    new_entry_id,
    new_session_id,
    resolve_prefix,
)


def test_ids_made_in_a_tight_loop_sort_in_creation_order() -> None:
    made = [new_entry_id() for _ in range(100_000)]
    assert sorted(made) == made
    assert len(set(made)) == len(made)


def test_ids_are_fixed_width_lowercase_crockford_base32() -> None:
    for ident in (new_entry_id(), new_session_id()):
        assert len(ident) == ID_LENGTH
        assert set(ident) <= set(ALPHABET)
        assert is_id(ident)
    assert not is_id("01ARZ3NDEKTSV4RRFFQ69G5FAV")  # uppercase
    assert not is_id("0" * 25)


def test_ids_in_one_millisecond_follow_the_counter() -> None:
    generator = IdGenerator(clock=lambda: 1_700_000_000_000)
    made = [generator.new() for _ in range(1000)]
    assert sorted(made) == made
    assert {ident[:10] for ident in made} == {made[0][:10]}


def test_ids_keep_increasing_when_the_clock_steps_back() -> None:
    times = iter([5_000, 6_000, 4_000, 4_000, 7_000])
    generator = IdGenerator(clock=lambda: next(times))
    made = [generator.new() for _ in range(5)]
    assert sorted(made) == made


def test_counter_overflow_borrows_the_next_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ids, "_COUNTER_LIMIT", 4)
    generator = IdGenerator(clock=lambda: 1_000)
    made = [generator.new() for _ in range(10)]
    assert sorted(made) == made
    assert id_time_ms(made[0]) == 1_000
    assert id_time_ms(made[-1]) == 1_002


def test_id_carries_its_millisecond_timestamp() -> None:
    generator = IdGenerator(clock=lambda: 1_717_171_717_171)
    assert id_time_ms(generator.new()) == 1_717_171_717_171


_PRINT_IDS = """
from earshot.agent.log.ids import new_entry_id
print("\\n".join(new_entry_id() for _ in range(20_000)))
"""


def test_ids_are_unique_across_processes() -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", _PRINT_IDS], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    per_process = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        made = out.split()
        assert sorted(made) == made
        per_process.append(made)
    everything = [ident for made in per_process for ident in made]
    assert len(set(everything)) == len(everything) == 80_000


CANDIDATES = ["01abc0000", "01abd0000", "01xyz0000"]


def test_unique_prefix_resolves_to_its_id() -> None:
    assert resolve_prefix(CANDIDATES, "01x") == "01xyz0000"
    assert resolve_prefix(CANDIDATES, "01abd") == "01abd0000"


def test_exact_id_resolves_to_itself() -> None:
    assert resolve_prefix(CANDIDATES, "01abc0000") == "01abc0000"


def test_prefix_is_case_insensitive_and_maps_crockford_aliases() -> None:
    assert resolve_prefix(CANDIDATES, "O1XY") == "01xyz0000"
    assert resolve_prefix(CANDIDATES, " 01ABD ") == "01abd0000"


def test_ambiguous_prefix_names_every_match() -> None:
    with pytest.raises(AmbiguousId) as caught:
        resolve_prefix(CANDIDATES, "01ab", what="session")
    assert caught.value.matches == ("01abc0000", "01abd0000")
    assert caught.value.prefix == "01ab"
    assert "session" in str(caught.value)
    assert "01abc0000" in str(caught.value)


def test_missing_prefix_says_nothing_matches() -> None:
    with pytest.raises(NoMatchingId) as caught:
        resolve_prefix(CANDIDATES, "zz", what="entry")
    assert caught.value.prefix == "zz"
    assert "no entry starts with 'zz'" in str(caught.value)


def test_empty_prefix_matches_nothing() -> None:
    with pytest.raises(NoMatchingId):
        resolve_prefix(["only"], "")
