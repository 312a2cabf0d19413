"""Verifying a store: every object against its digest, every reference."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .digest import Digest, short
from .errors import EarshotError
from .objects import Location, ObjectReader, ObjectStore, ObjectType, decode_chunks
from .tree import Kind


@dataclass(slots=True)
class FsckReport:
    """What was checked and what is broken (one line per problem)."""

    objects: int = 0
    snapshots: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_store(store: ObjectStore, progress: Callable[[int], None] | None = None) -> FsckReport:
    """Read every object and verify it; then check that references resolve."""
    report = FsckReport()
    with store.reader() as reader:
        types: dict[bytes, ObjectType] = {}
        for key, value in reader.view.items("index"):
            digest = Digest(key)
            types[key] = Location.decode(value).type
            report.objects += 1
            if progress is not None and report.objects % 1024 == 0:
                progress(report.objects)
            try:
                reader.verify(digest)
            except EarshotError as exc:
                report.problems.append(str(exc))
        for key, _ in reader.view.items("snapshots"):
            report.snapshots += 1
            _check_references(reader, Digest(key[8:]), types, report)
    return report


def _check_references(
    reader: ObjectReader, snap: Digest, types: dict[bytes, ObjectType], report: FsckReport
) -> None:
    if types.get(snap) is not ObjectType.SNAPSHOT:
        report.problems.append(f"snapshot {short(snap)} is listed but missing")
        return
    try:
        tree = reader.read_snapshot(snap).tree
    except EarshotError as exc:
        report.problems.append(str(exc))
        return
    stack = [(tree, "/")]
    seen: set[Digest] = set()
    while stack:
        digest, path = stack.pop()
        if digest in seen:
            continue
        seen.add(digest)
        if types.get(digest) is not ObjectType.TREE:
            report.problems.append(
                f"snapshot {short(snap)}: tree {short(digest)} at {path} missing"
            )
            continue
        try:
            entries = reader.read_tree(digest)
        except EarshotError as exc:
            report.problems.append(f"snapshot {short(snap)}: {path}: {exc}")
            continue
        for entry in entries:
            if entry.digest is None:
                continue
            name = path + entry.name.decode("utf-8", "surrogateescape")
            if entry.kind is Kind.DIR:
                stack.append((entry.digest, name + "/"))
            elif entry.digest not in types:
                report.problems.append(
                    f"snapshot {short(snap)}: {name}: content {short(entry.digest)} missing"
                )
            elif types[entry.digest] is ObjectType.CHUNKED:
                _check_chunks(reader, entry.digest, types, name, report)


def _check_chunks(
    reader: ObjectReader,
    digest: Digest,
    types: dict[bytes, ObjectType],
    name: str,
    report: FsckReport,
) -> None:
    try:
        chunks = decode_chunks(reader.read_raw(digest)[1])
    except EarshotError:
        return  # already reported by the object pass
    for chunk, _size in chunks:
        if chunk not in types:
            report.problems.append(f"{name}: chunk {short(chunk)} missing")
