"""python -m benchmarks: run the suite, re-render its report, compare two runs.

    python -m benchmarks run --quick                  # the smoke test CI runs
    python -m benchmarks run --full --out benchmarks  # the published figures
    python -m benchmarks run --only snapshots --sizes 100k --trees kernel
    python -m benchmarks run --only snapshots --base /tmp/before/.venv/bin/earshot
    python -m benchmarks report DIR                   # RESULTS.md and plots from DIR/results.json
    python -m benchmarks compare OLD NEW              # every figure that moved past its noise
    python -m benchmarks merge OUT DIR DIR…           # one report from a run made in parts
    python -m benchmarks list                         # the figures and trees
    python -m benchmarks tree generated-100k DIR      # make one of the suite's trees into DIR
    python -m benchmarks facts --source DIR           # the storage facts docs/FACTS.md cites

Exit codes: 0 done; 1 a figure or tree failed (listed in results.json's
"errors" and on stderr), or bad input; 2 usage.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _earshot_exe() -> str:
    beside = Path(sys.executable).parent / "earshot"
    found = str(beside) if beside.exists() else shutil.which("earshot")
    if not found:
        raise SystemExit("benchmarks: no earshot to time: install the project, or --earshot PATH")
    return found


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the suite, then write RESULTS.md and the plots")
    profile = run.add_mutually_exclusive_group()
    profile.add_argument(
        "--quick",
        dest="profile",
        action="store_const",
        const="quick",
        help="10,000 files, one repeat: proves every figure runs (the default)",
    )
    profile.add_argument(
        "--full",
        dest="profile",
        action="store_const",
        const="full",
        help="10k-1M generated files and the real trees, 5 repeats: the published figures",
    )
    run.add_argument("--only", nargs="+", metavar="FIGURE", help="these figures only (see list)")
    run.add_argument("--sizes", nargs="+", metavar="N", help="generated tree sizes: 10k 100k 1M")
    run.add_argument(
        "--trees",
        nargs="+",
        metavar="TREE",
        help="real trees: kernel node_modules venv binary (alone unless --sizes is given too)",
    )
    run.add_argument("--repeat", type=int, help="timed repeats (quick 1, full 5)")
    run.add_argument("--out", type=Path, help="where results.json, RESULTS.md and plots/ go")
    run.add_argument(
        "--work",
        type=Path,
        # Outside the checkout: an earshot command run in a copy without
        # --root would find the checkout's git top as its root.
        default=Path(tempfile.gettempdir()) / "earshot-bench-work",
        help="scratch: tree copies, stores (default: in the temporary directory)",
    )
    run.add_argument(
        "--cache",
        type=Path,
        default=HERE / "work" / "trees",
        help="where made trees are kept for later runs",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="add to --out's results.json: keep its figures, run only the missing ones",
    )
    run.add_argument("--kernel", type=Path, help="the kernel source: a directory or the tarball")
    run.add_argument("--earshot", help="the earshot executable to time (default: this venv's)")
    run.add_argument(
        "--base",
        metavar="EXE",
        help="a second earshot (e.g. the code before a change) timed beside the first as "
        "earshot-base, in the figures that support it (snapshots, index_cost)",
    )
    run.add_argument(
        "--no-drop-caches",
        dest="drop_caches",
        action="store_false",
        help="never drop the page cache (it slows everything else on the machine)",
    )
    run.set_defaults(profile="quick")
    report = sub.add_parser("report", help="write RESULTS.md and plots/ from DIR/results.json")
    report.add_argument("dir", type=Path)
    compare = sub.add_parser("compare", help="every figure that moved past its noise")
    compare.add_argument("old", type=Path, help="a results.json, or its directory")
    compare.add_argument("new", type=Path)
    compare.add_argument("--all", action="store_true", help="also the figures that did not move")
    merge = sub.add_parser(
        "merge", help="one report from runs made in parts on this machine (--only, --trees)"
    )
    merge.add_argument("out", type=Path, help="where the merged results.json and report go")
    merge.add_argument("runs", type=Path, nargs="+", help="the runs' directories")
    sub.add_parser("list", help="the figures, and the trees of each profile")
    tree = sub.add_parser("tree", help="make one of the suite's trees into DIR (must not exist)")
    tree.add_argument(
        "name", help="generated-N (10k, 100k, 1M), kernel, node_modules, venv or binary"
    )
    tree.add_argument("dir", type=Path)
    tree.add_argument("--kernel", type=Path, help="the kernel source: a directory or the tarball")
    tree.add_argument(
        "--describe",
        action="store_true",
        help="then print its counts and sizes (JSON; generated trees: compression ratios)",
    )
    facts = sub.add_parser("facts", help="measure the storage facts docs/FACTS.md relies on")
    facts.add_argument("--source", type=Path, required=True, help="a real source tree")
    facts.add_argument("--repeat", type=int, default=5)
    facts.add_argument("--json", type=Path, help="also write every figure here")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "list":
        return _list()
    if args.command == "report":
        from benchmarks.report import render

        written = render(args.dir)
        print("\n".join(str(p) for p in written))
        return 0
    if args.command == "merge":
        from benchmarks.report import render
        from benchmarks.suite.record import load, merge

        try:
            merge([load(d) for d in args.runs]).save(args.out)
        except (OSError, ValueError, KeyError) as exc:
            print(f"benchmarks: {exc}", file=sys.stderr)
            return 1
        print("\n".join(str(p) for p in render(args.out)))
        return 0
    if args.command == "compare":
        from benchmarks.report.compare import compare

        return compare(args.old, args.new, show_all=args.all)
    if args.command == "tree":
        return _tree(args)
    if args.command == "facts":
        from benchmarks.facts import measure_all

        measure_all(args.source, args.repeat, args.json)
        return 0
    return _run(args)


def _tree(args: argparse.Namespace) -> int:
    import json

    from benchmarks import gen_tree
    from benchmarks.suite import trees

    if args.dir.exists():
        print(f"benchmarks: {args.dir} exists; name a new directory", file=sys.stderr)
        return 1
    try:
        spec = trees.parse(args.name)
        source = trees.make(spec, args.dir, args.kernel)
    except (ValueError, trees.TreeUnavailable) as exc:
        print(f"benchmarks: {exc}", file=sys.stderr)
        return 1
    print(f"benchmarks: made {spec.key} in {args.dir} ({source})", file=sys.stderr)
    if args.describe:
        info = trees.describe(spec, args.dir, source)
        shown: dict[str, object] = {
            "files": info.files,
            "bytes": info.bytes,
            "gitignore_files": info.gitignores,
        }
        if spec.kind == "generated":
            shown.update(gen_tree.describe(args.dir, compression=True))
        print(json.dumps(shown, indent=2))
    return 0


def _list() -> int:
    from benchmarks.figures import registry
    from benchmarks.suite import plan

    for name, figure in registry().items():
        print(f"{name:14} {figure.title}")
    for profile in ("quick", "full"):
        trees = ", ".join(s.key for s in plan.make(profile, []).trees)
        print(f"--{profile}: {trees}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from benchmarks.figures import registry
    from benchmarks.report import render
    from benchmarks.suite import plan, runner

    figures = registry()
    try:
        the_plan = plan.make(
            args.profile,
            list(figures),
            only=args.only,
            sizes=args.sizes,
            trees=args.trees,
            repeat=args.repeat,
            drop_caches=args.drop_caches,
        )
    except ValueError as exc:
        print(f"benchmarks: {exc}", file=sys.stderr)
        return 2
    out = args.out or HERE / "work" / f"results-{datetime.now():%Y%m%d-%H%M%S}"
    the_plan.args = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    earshot = args.earshot or _earshot_exe()
    if args.resume and args.out is None:
        print("benchmarks: --resume needs --out, the run to add to", file=sys.stderr)
        return 2
    try:
        results = runner.run(
            the_plan,
            figures,
            out,
            args.work,
            args.cache,
            earshot,
            kernel=args.kernel,
            base=args.base,
            resume=args.resume,
        )
    except ValueError as exc:
        print(f"benchmarks: {exc}", file=sys.stderr)
        return 1
    for path in render(out):
        print(path)
    for err in results.errors:
        print(f"benchmarks: {err['figure']} on {err['tree']}: {err['message']}", file=sys.stderr)
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
