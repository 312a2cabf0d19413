"""The destructive-command heuristic fed mutated commands: a verdict for every one,
and every doubt towards "destructive".

The commands start from the table of test_destructive.py, mutated (words cut,
quotes and operators put in), which reaches far more of the grammar than
random text. Then ``unheld_under`` (agent/core/doomed.py), which matches the
targets a verdict names against a stored tree, is fed any target at all.
"""

from __future__ import annotations

from collections.abc import Callable

from fuzz import examples, mutated
from hypothesis import example, given
from hypothesis import strategies as st
from test_destructive import DESTRUCTIVE, SAFE

from earshot.agent.core.doomed import unheld_under
from earshot.agent.shell.destructive import Verdict, classify
from earshot.agent.shell.words import literal, parse
from earshot.cas.backend import MemoryBackend
from earshot.cas.digest import Digest
from earshot.cas.lookup import lookup_under
from earshot.cas.objects import ObjectStore
from earshot.cas.tree import Kind, TreeEntry, Unrecorded

TABLE = [command for _, command in SAFE + DESTRUCTIVE]
SHELLY = [b" ", b";", b"&&", b"|", b"'", b'"', b"$(", b")", b"`", b"\\", b">", b"<<EOF\n", b"*"]


@st.composite
def commands(draw: st.DrawFn) -> str:
    seed = draw(st.sampled_from(TABLE)).encode()
    if draw(st.booleans()):  # shell punctuation spliced in at a random place
        at = draw(st.integers(0, len(seed)))
        seed = seed[:at] + draw(st.sampled_from(SHELLY)) + seed[at:]
    data = draw(mutated(st.just(seed), most=3)) if draw(st.booleans()) else seed
    return data.decode("utf-8", "surrogateescape")


def world(exists: bool | None) -> Callable[[str], bool] | None:
    return None if exists is None else (lambda path: exists)


@examples(2)
@given(commands())
@example("rm -rf $'\\777'")
@example("cp a \"$(printf '\\udcff')\"")
@example("echo $'\\x")
def test_a_mutated_command_gets_a_verdict_that_grows_with_what_exists(command: str) -> None:
    absent, present, unknown = (classify(command, world(e)) for e in (False, True, None))
    for verdict in (absent, present, unknown):
        assert isinstance(verdict, Verdict)
        assert verdict.destructive == bool(verdict.reasons)
        assert all(isinstance(t, str) for t in verdict.targets)
        assert not verdict.targets or verdict.destructive
    # Onto nothing, a write loses nothing; onto what may exist, it may.
    assert present.destructive or not absent.destructive
    assert unknown.destructive or not present.destructive


@examples(2)
@given(commands())
def test_every_word_of_a_mutated_command_is_a_literal_or_unknown(command: str) -> None:
    stack = [parse(command)]
    while stack:
        node = stack.pop()
        value = literal(node, ".")
        assert value is None or isinstance(value, str)
        stack.extend(node.children)


@examples(2)
@given(commands(), st.data())
def test_a_path_exists_that_answers_anything_or_fails_still_gives_a_verdict(
    command: str, data: st.DataObject
) -> None:
    answers = data.draw(st.lists(st.sampled_from([True, False, "fail"]), min_size=1, max_size=8))
    asked: list[str] = []

    def path_exists(path: str) -> bool:
        asked.append(path)
        answer = answers[len(asked) % len(answers)]
        if answer == "fail":
            raise OSError("no answer")
        return bool(answer)

    verdict = classify(command, path_exists)
    assert verdict.destructive == bool(verdict.reasons)
    assert all(isinstance(p, str) for p in asked)


# -- unheld_under: a verdict's targets against a stored tree ------------------------------


def _store() -> tuple[ObjectStore, Digest]:
    store = ObjectStore(MemoryBackend())
    with store.writer() as writer:
        blob = writer.put_blob(b"x")
        big = [
            TreeEntry(name, Kind.UNRECORDED, 0o644, 1 << 30, None, reason)
            for name, reason in (
                (b"big.bin", Unrecorded.TOO_LARGE),
                (b".env", Unrecorded.IGNORED),
                (b"node_modules", Unrecorded.CACHE),
                (b"a.o", Unrecorded.BUILD),
                (b"f\xff", Unrecorded.EXCLUDED),
            )
        ]
        sub = writer.put_tree([TreeEntry(b"f", Kind.FILE, 0o644, 1, blob), *big])
        tree = writer.put_tree([TreeEntry(b"sub", Kind.DIR, 0o755, 0, sub), *big])
    return store, tree


STORE, TREE = _store()
PARTS = ["sub", "big.bin", ".env", "node_modules", "a.o", "f", "*", "?", "[", "[!a]", ".", ".."]
targets = st.lists(
    st.lists(st.sampled_from(PARTS) | st.text(max_size=4), max_size=4).map("/".join), max_size=4
)


@examples(2)
@given(targets)
@example(["", "/", "//", "sub//f", "sub/*/x", "[", "sub/["])
@example(["\udcff", "f\udcff", "sub/\ud800"])
def test_any_target_finds_only_paths_held_as_existence(paths: list[str]) -> None:
    with STORE.reader() as reader:
        found = unheld_under(reader, TREE, paths)
        assert len(set(found)) == len(found)
        for path in found:  # held as existence only, or below what is
            entry, _ = lookup_under(reader, TREE, path)
            assert entry is not None and entry.kind is Kind.UNRECORDED, path
