"""git's view against earshot's: the paths each counts on the same tree.

On a copy of the tree made a git repository (``git init``, ``git add -A``),
benchmarks/git_view.py lists what git tracks plus what it would add, and
what a fresh earshot snapshot records with keeping ignored files off; then
the ignored files earshot keeps by default, each of which git must list as
ignored. Counts, not times: ``paths`` for both, and the paths only one of
them has (every one a defect, also listed under the run's errors with the
first few). The snapshots are taken in this process, by the installed
library (not ``--earshot``).
"""

from __future__ import annotations

from benchmarks import git_view
from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree, tree_weight
from benchmarks.suite.trees import TreeSpec

NAME = "git_view"
SHOW = 5  # differences named in the error, each side


class GitView:
    name = NAME
    title = "git's view against earshot's: the paths each counts"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return True

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        return tree_weight(tree) * 4

    def run(self, ctx: Context, tree: Tree) -> None:
        root = ctx.copy(tree, "git")
        ctx.progress.step("git init, git add -A")
        git_view.make_repository(root)
        ctx.progress.step("git ls-files, and two earshot snapshots")
        found = git_view.compare(root)
        record = ctx.results.measure
        record(NAME, "paths", tree.key, "git", found.git, "count")
        record(NAME, "paths", tree.key, "earshot", found.earshot, "count")
        record(NAME, "tracked_ignored", tree.key, "git", found.tracked_ignored, "count")
        record(NAME, "kept_ignored", tree.key, "earshot", found.kept, "count")
        differences = {
            "only_earshot": found.only_earshot,
            "only_git": found.only_git,
            "kept_not_ignored": found.kept_not_ignored,
        }
        for metric, paths in differences.items():
            record(NAME, metric, tree.key, "earshot", len(paths), "count")
        wrong = [f"{k}: {len(v)}, e.g. {', '.join(v[:SHOW])}" for k, v in differences.items() if v]
        if wrong:
            ctx.results.error(NAME, tree.key, "earshot and git differ: " + "; ".join(wrong))


FIGURE = GitView()
