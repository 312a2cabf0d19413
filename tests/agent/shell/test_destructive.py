"""The destructive-command heuristic: a table of commands both ways, plus the
path_exists contract, unparseable input and the shape of verdicts."""

from __future__ import annotations

import base64
import dataclasses
import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from earshot.agent.shell.destructive import Verdict, classify


def _encoded(script: str) -> str:
    return base64.b64encode(script.encode("utf-16-le")).decode()


# Safe with path_exists=None: nothing in here may write onto an existing path.
SAFE: list[tuple[str, str]] = [
    # quoted strings are data
    ("echo-quoted-rm", 'echo "rm -rf /"'),
    ("grep-rm-pattern", "grep -r 'rm' ."),
    ("printf-quoted-rm", "printf '%s\\n' 'rm -rf /'"),
    ("echo-escaped-rm-word", "echo \\rm -rf x"),
    ("comment-rm", "ls # rm -rf /"),
    ("git-commit-message-rm", 'git commit -m "rm old files; git reset --hard"'),
    ("git-log-grep-reset", "git log --grep=reset"),
    ("herestring-data", 'grep x <<< "rm -rf /"'),
    ("cat-heredoc-data", "cat <<EOF\nrm -rf /\nEOF"),
    # redirects that cannot destroy
    ("ls-devnull", "ls > /dev/null"),
    ("ls-2to1-pipe", "ls 2>&1 | grep x"),
    ("stderr-devnull", "make 2>/dev/null"),
    ("both-devnull", "make >/dev/null 2>&1"),
    ("amp-devnull", "make &> /dev/null"),
    ("to-dev-stderr", "echo err > /dev/stderr"),
    ("to-dev-stdout", "echo out > /dev/stdout"),
    ("to-dev-tty", "ls > /dev/tty"),
    ("dup-to-stderr", "echo err >&2"),
    ("close-fd", "exec 3>&-"),
    ("input-redirect", "wc -l < input.txt"),
    ("append", "cat a >> b"),
    ("append-gitignore", "echo '.venv' >> .gitignore"),
    ("append-both", "make &>> build.log"),
    ("tee-append", "echo x | tee -a log.txt"),
    ("tee-devnull", "echo x | tee /dev/null"),
    # git reads
    ("git-status", "git status"),
    ("git-log-head", "git log --oneline | head"),
    ("git-diff", "git diff HEAD~1 -- src/"),
    ("git-show", "git show HEAD:README.md"),
    ("git-branch", "git branch -a"),
    ("git-C-status", "git -C sub status --short"),
    ("git-add", "git add -A"),
    ("git-fetch", "git fetch origin"),
    ("git-push", "git push origin main"),
    ("git-stash-list", "git stash list"),
    ("git-clean-dry-run", "git clean -n -d"),
    ("git-checkout-new-branch", "git checkout -b feature"),
    ("git-switch-create", "git switch -c feature"),
    ("git-apply-check", "git apply --check fix.patch"),
    ("git-worktree-list", "git worktree list"),
    ("hg-status", "hg status"),
    # editors and tools in read-only modes
    ("sed-n", "sed -n 1p f"),
    ("sed-e-stdout", "sed -e 's/i/j/' file.txt"),
    ("sed-E-stdout", "sed -E 's/(a)/\\1/' f | head"),
    ("perl-ne", "perl -ne 'print if /x/' file"),
    ("awk-print", "awk '{print $1}' file"),
    ("find-print", "find . -name x -print"),
    ("find-name", "find . -name '*.pyc'"),
    ("find-exec-grep", "find . -name '*.py' -exec grep -l TODO {} +"),
    ("sort-stdout", "sort -u names.txt"),
    ("diff-procsub", "diff <(sort a) <(sort b)"),
    ("tar-list", "tar -tzf a.tgz"),
    ("tar-create-stdout", "tar -czf - src | wc -c"),
    ("unzip-list", "unzip -l a.zip"),
    ("gzip-stdout", "gzip -c file | wc -c"),
    ("rsync-dry-run", "rsync -avn --delete src/ dst/"),
    ("rsync-to-remote", "rsync -a src/ host:/backup/"),
    ("patch-dry-run", "patch --dry-run -p1 < fix.patch"),
    ("cp-no-clobber", "cp -n a b"),
    ("mv-no-clobber", "mv -n a b"),
    ("ln-s-no-force", "ln -s target link"),
    ("install-d", "install -d build/out"),
    ("curl-stdout", "curl -s https://example.com | jq ."),
    ("wget-stdout", "wget -qO- https://example.com"),
    ("mkdir", "mkdir -p build/out"),
    ("touch", "touch new.txt"),
    ("black-check", "black --check ."),
    ("ruff-check", "ruff check src"),
    ("ruff-format-check", "ruff format --check ."),
    ("prettier-check", "prettier --check ."),
    ("gofmt-list", "gofmt -l ."),
    ("cargo-fmt-check", "cargo fmt --check"),
    # builds, tests, scripts: recipes and scripts are not read (documented limit)
    ("npm-test", "npm test"),
    ("npm-run-build", "npm run build"),
    ("yarn-test", "yarn test"),
    ("pnpm-run-lint", "pnpm run lint"),
    ("make", "make"),
    ("make-test", "make -j4 test"),
    ("cargo-build", "cargo build --release"),
    ("go-test", "go test ./..."),
    ("pip-list", "pip list"),
    ("pip-freeze-stdout", "pip freeze | grep requests"),
    ("python-m-pip-show", "python -m pip show requests"),
    ("uv-run-pytest", "uv run pytest -q"),
    ("poetry-run-pytest", "poetry run pytest"),
    ("npx-tsc", "npx tsc --noEmit"),
    ("pytest", "pytest -q tests/"),
    ("python-script", "python script.py --out result.json"),
    ("python-c-print", 'python -c "print(1)"'),
    ("python-heredoc-no-writes", "python - <<'EOF'\nprint('rm -rf /')\nEOF"),
    ("node-e", 'node -e "console.log(1)"'),
    ("bash-script-file", "bash scripts/test.sh"),
    ("dot-slash-script", "./configure --prefix=/usr"),
    ("source-venv", "source .venv/bin/activate && pytest"),
    ("ssh-remote-not-inspected", "ssh host 'rm -rf /tmp/x'"),
    # shell structure around safe commands
    ("bash-c-echo", 'bash -c "echo hi"'),
    ("sh-c-pipeline", "sh -c 'ls -la | wc -l'"),
    ("bash-heredoc-safe", "bash <<'EOF'\necho hi\nls\nEOF"),
    ("bash-herestring-safe", "bash <<< 'echo hi'"),
    ("eval-literal-safe", "eval echo hi"),
    ("cd-and-ls", "cd src && ls"),
    ("subshell-cd-make", "(cd sub && make)"),
    ("for-echo", 'for f in *.py; do echo "$f"; done'),
    ("while-read-echo", 'while read -r line; do echo "$line"; done < input.txt'),
    ("if-cat", "if [ -f x ]; then cat x; fi"),
    ("case-echo", "case $x in a) echo a;; *) echo b;; esac"),
    ("test-and-echo", "[[ -d build ]] && echo yes"),
    ("function-safe", "greet() { echo hi; }; greet"),
    ("assign-rm-word", "x=rm"),
    ("echo-var", "echo $HOME"),
    ("echo-cmdsub-date", "echo $(date +%s)"),
    ("arithmetic", "echo $((1 + 2))"),
    ("background-sleep", "sleep 1 &"),
    ("whitespace-only", "   "),
    # wrappers around safe commands
    ("sudo-ls", "sudo ls /root"),
    ("env-alone", "env"),
    ("env-var-python", "env FOO=1 python x.py"),
    ("xargs-grep", "xargs grep -l foo < files.txt"),
    ("xargs-default-echo", "printf 'a\\nb' | xargs"),
    ("timeout-pytest", "timeout 60 pytest"),
    ("nohup-devnull", "nohup python server.py > /dev/null 2>&1 &"),
    ("command-v-rm", "command -v rm"),
    ("type-rm", "type rm"),
    ("time-ls", "time ls"),
    ("stdbuf-grep", "stdbuf -oL grep x log"),
    # Windows shells
    ("pwsh-get-childitem", 'pwsh -c "Get-ChildItem | Select-Object Name"'),
    ("powershell-write-host-quoted", "powershell -Command \"Write-Host 'Remove-Item x'\""),
    ("pwsh-append", 'pwsh -c "Add-Content log.txt hi"'),
    ("pwsh-null-redirect", "pwsh -c 'Get-Date > $null'"),
    ("cmd-dir", "cmd /c dir"),
    ("cmd-echo-nul", 'cmd /c "echo hi > nul"'),
    ("cmd-type", "cmd /c type file.txt"),
    ("cmd-echo-append", 'cmd /c "echo x >> log.txt"'),
    ("pwsh-version", "pwsh -Version"),
    ("pwsh-file", "pwsh -File build.ps1"),
    ("powershell-get-content", 'powershell -c "Get-Content a.txt | Select-String foo"'),
    # more everyday reads
    ("git-diff-stat", "git diff --stat"),
    ("git-blame", "git blame -L 10,20 app.py"),
    ("git-rev-parse", "git rev-parse --show-toplevel"),
    ("git-remote-v", "git remote -v"),
    ("git-ls-files", "git ls-files | wc -l"),
    ("git-grep-rm", "git grep -n 'rm -rf'"),
    ("git-stash-show", "git stash show -p"),
    ("git-bisect-log", "git bisect log"),
    ("git-clone", "git clone https://example.com/x.git"),
    ("git-init", "git init"),
    ("git-commit-amend", "git commit --amend --no-edit"),
    ("cat-file", "cat README.md"),
    ("head-tail", "head -n 20 a.log; tail -n 5 a.log"),
    ("du-df", "du -sh . && df -h"),
    ("ps-grep", "ps aux | grep python"),
    ("kill-pid", "kill 1234"),
    ("pwd-whoami", "pwd; whoami; uname -a"),
    ("export-unset", "export FOO=1; unset FOO"),
    ("set-options", "set -euo pipefail"),
    ("jq", "jq '.a' data.json"),
    ("stat-file", "stat a.bin && file a.bin"),
    ("sha256sum-check", "sha256sum -c sums.txt"),
    ("diff-files", "diff -u a b"),
    ("python-version", "python3 --version"),
    ("npm-ls", "npm ls --depth=0"),
    ("npm-view", "npm view react version"),
    ("pip-show", "pip show requests"),
    ("cargo-clippy", "cargo clippy -- -D warnings"),
    ("go-vet", "go vet ./..."),
    ("mypy", "mypy --strict src"),
    ("black-diff", "black --diff ."),
    ("isort-check", "isort --check-only ."),
    ("eslint-no-fix", "npx eslint src"),
    ("docker-build", "docker build -t app ."),
    ("curl-head", "curl -I https://example.com"),
    ("xargs-n1-echo", "echo a b | xargs -n1 echo"),
    ("find-newer-head", "find . -newer stamp -type f | head"),
    ("sed-from-stdin", "sed 's/a/b/' < in.txt"),
    ("while-sleep", "while true; do sleep 1; done"),
    ("tee-stdout-only", "ls | tee"),
    ("read-from-file", "read -r x < file"),
    ("trap-echo", "trap 'echo bye' EXIT"),
    ("bash-n-syntax-check", "bash -n script.sh"),
    ("sh-c-git-status", "sh -c 'git status'"),
    ("gzip-keep", "gzip -k file"),
    ("gunzip-stdout", "gunzip -c a.gz | head"),
    ("tar-extract-to-stdout", "tar -xOf a.tar file"),
    ("unzip-pipe", "unzip -p a.zip f | head"),
    ("scp-upload", "scp file host:/tmp/"),
    ("dd-no-of", "dd if=/dev/urandom bs=16 count=1 | base64"),
    ("exec-stderr-devnull", "exec 2>/dev/null"),
    ("env-C-ls", "env -C sub ls"),
    ("node-script", "node build.js"),
    ("go-run", "go run ."),
    ("cargo-run", "cargo run -- --help"),
    ("python-http-server-bg", "python -m http.server 8000 &"),
    ("echo-chmod-text", "echo chmod +x a"),
    ("sudo-l", "sudo -l"),
]

DESTRUCTIVE: list[tuple[str, str]] = [
    # the curated list
    ("rm-rf", "rm -rf build"),
    ("rm-quoted-name", '"rm" a'),
    ("rm-escaped", "\\rm a"),
    ("rm-absolute-path", "/bin/rm a"),
    ("rm-concatenated-name", "r''m a"),
    ("rm-upper-case", "RM a"),
    ("unlink", "unlink a"),
    ("rmdir", "rmdir empty"),
    ("shred", "shred -u secret"),
    ("truncate", "truncate -s 0 log"),
    ("dd-of", "dd if=/dev/zero of=disk.img bs=1M count=1"),
    ("mkfs", "mkfs.ext4 /dev/sdb1"),
    ("wipefs", "wipefs -a /dev/sdb"),
    ("chmod-x", "chmod +x script.sh"),
    ("chown-R", "chown -R bob: ."),
    ("chgrp", "chgrp staff f"),
    ("patch", "patch -p1 < fix.patch"),
    ("tar-x", "tar -xzf a.tgz"),
    ("tar-old-style-x", "tar xzf a.tgz"),
    ("unzip", "unzip a.zip"),
    ("unzip-o", "unzip -o a.zip -d out"),
    ("gzip-replaces", "gzip big.log"),
    ("make-clean", "make clean"),
    ("make-C-distclean", "make -C sub distclean"),
    ("rsync-delete", "rsync -a --delete src/ dst/"),
    ("rsync-delete-after", "rsync -a --delete-after src/ dst/"),
    ("rename", "rename 's/a/b/' *.txt"),
    ("7z-extract", "7z x a.7z"),
    # git
    ("git-checkout-file", "git checkout -- file"),
    ("git-checkout-branch", "git checkout main"),
    ("git-reset-hard", "git reset --hard HEAD"),
    ("git-C-reset", "git -C sub reset --hard"),
    ("git-clean-fdx", "git clean -fdx"),
    ("git-restore", "git restore src/app.py"),
    ("git-stash", "git stash"),
    ("git-stash-pop", "git stash pop"),
    ("git-switch", "git switch main"),
    ("git-rebase", "git rebase -i HEAD~3"),
    ("git-merge", "git merge feature"),
    ("git-pull", "git pull --rebase"),
    ("git-apply", "git apply fix.patch"),
    ("git-am", "git am < 0001.patch"),
    ("git-rm", "git rm -r old/"),
    ("git-mv", "git mv a b"),
    ("git-cherry-pick", "git cherry-pick abc123"),
    ("git-revert", "git revert HEAD"),
    ("git-worktree-remove", "git worktree remove ../wt"),
    ("git-submodule-update", "git submodule update --init --force"),
    ("git-subcommand-variable", "git $sub"),
    ("git-no-pager-reset", "git --no-pager -c core.x=y reset"),
    # in-place editors and formatters
    ("sed-i", "sed -i s/a/b/ f"),
    ("sed-i-suffix", "sed -i.bak 's/a/b/' f"),
    ("sed-in-place", "sed --in-place 's/a/b/' f"),
    ("sed-bundled-Ei", "sed -Ei 's/(a)/b/' f"),
    ("sed-bsd-i-empty", "sed -i '' 's/a/b/' f"),
    ("perl-pi", "perl -pi -e 's/a/b/' f"),
    ("perl-i-bak", "perl -i.bak -pe 's/a/b/' f"),
    ("gawk-inplace", "gawk -i inplace '{print}' f"),
    ("black", "black ."),
    ("ruff-format", "ruff format ."),
    ("ruff-fix", "ruff check --fix ."),
    ("prettier-write", "prettier --write src"),
    ("gofmt-w", "gofmt -w ."),
    ("npx-prettier-write", "npx prettier --write ."),
    # redirects
    ("redirect-cat", "cat a > b"),
    ("redirect-clobber", "echo x >| f"),
    ("redirect-amp", "make &> build.log"),
    ("redirect-stderr-file", "make 2> err.txt"),
    ("redirect-amp-dup-file", "make >& build.log"),
    ("redirect-variable-target", 'echo hi > "$out"'),
    ("redirect-glob-target", "echo hi > *.txt"),
    ("redirect-tilde-target", "echo hi > ~/notes"),
    ("redirect-only", "> file"),
    ("redirect-group", "{ echo a; echo b; } > out"),
    ("redirect-in-subst", "echo $(date > stamp)"),
    ("exec-fd-to-file", "exec 3> state"),
    ("tee", "echo x | tee out.txt"),
    ("sort-o", "sort -o f f"),
    ("sponge", "sort f | sponge f"),
    ("curl-o", "curl -o page.html https://example.com"),
    ("wget-O", "wget -O page.html https://example.com"),
    # copies onto paths that may exist (path_exists=None)
    ("cp-unknown-dest", "cp a b"),
    ("mv-unknown-dest", "mv a b"),
    ("install-unknown-dest", "install -m 755 tool /usr/local/bin/tool"),
    ("ln-sf", "ln -sf target link"),
    ("cp-into-dir", "cp a.txt build/"),
    # non-literal command words
    ("var-command", "x=rm; $x -rf a"),
    ("quoted-var-command", '"$CMD" foo'),
    ("braced-var-command", "${RM} a"),
    ("cmdsub-command", "$(which rm) a"),
    # nesting
    ("cmdsub-rm", "echo $(rm -rf x)"),
    ("backtick-rm", "echo `rm -rf x`"),
    ("quoted-cmdsub-rm", 'echo "$(rm -rf x)"'),
    ("subshell-rm", "(cd sub && rm x)"),
    ("group-rm", "{ rm x; }"),
    ("for-rm", 'for f in *; do rm "$f"; done'),
    ("while-rm", 'while read -r f; do rm "$f"; done < list'),
    ("if-rm", "if [ -f x ]; then rm x; fi"),
    ("else-mv", "if false; then :; else mv a b; fi"),
    ("case-rm", "case $x in a) rm y;; esac"),
    ("function-body-rm", "cleanup() { rm -rf build; }"),
    ("procsub-rm", "diff <(rm x) b"),
    ("assignment-subst-rm", "x=$(rm y)"),
    ("local-subst-rm", "f() { local x=$(rm y); }"),
    ("expansion-default-rm", "echo ${x:-$(rm y)}"),
    ("test-subst-rm", "[[ -n $(rm x) ]]"),
    ("pipeline-xargs-rm", "ls | xargs rm"),
    ("negated-rm", "! rm a"),
    ("background-rm", "rm a &"),
    ("or-chain-rm", "test -f x || rm y"),
    ("heredoc-unquoted-subst-rm", "cat <<EOF\n$(rm x)\nEOF"),
    # wrappers
    ("sudo-u-rm", "sudo -u bob rm a"),
    ("sudo-env-rm", "sudo -E env X=1 rm a"),
    ("sudo-shell-stdin", "sudo -s"),
    ("doas-rm", "doas rm a"),
    ("env-rm", "env FOO=1 rm a"),
    ("env-i-rm", "env -i PATH=/bin rm a"),
    ("env-S-rm", "env -S 'rm -rf x'"),
    ("timeout-git-clean", "timeout 5 git clean -fdx"),
    ("timeout-signal-rm", "timeout -s KILL 5 rm a"),
    ("nice-rm", "nice -n 10 rm -rf x"),
    ("ionice-rm", "ionice -c3 rm -rf x"),
    ("nohup-rm", "nohup rm -rf x &"),
    ("time-rm", "time rm a"),
    ("stdbuf-rm", "stdbuf -oL rm a"),
    ("chronic-rm", "chronic rm -rf x"),
    ("command-rm", "command rm a"),
    ("builtin-exec-rm", "exec rm a"),
    ("xargs-rm", "xargs rm < list"),
    ("xargs-0-rm", "find . -print0 | xargs -0 rm -f"),
    ("xargs-I-mv", "find . -name '*.bak' | xargs -I{} mv {} old/"),
    ("watch-rm", "watch -n 5 rm -f cache"),
    ("flock-c-rm", "flock /tmp/l -c 'rm x'"),
    ("parallel-rm", "parallel rm ::: a b"),
    ("su-c-rm", "su -c 'rm a' bob"),
    ("trap-rm", "trap 'rm -rf \"$tmp\"' EXIT"),
    # shells and eval
    ("bash-c-rm", "bash -c 'rm a'"),
    ("sh-c-nested-bash-c", "sh -c \"bash -c 'rm a'\""),
    ("zsh-lc-reset", "zsh -lc 'git reset --hard'"),
    ("bash-euo-c", "bash -euo pipefail -c 'rm a'"),
    ("bash-c-variable", 'bash -c "$CMD"'),
    ("eval-rm", 'eval "rm -rf x"'),
    ("eval-variable", 'eval "$cmd"'),
    ("bash-heredoc-rm", "bash <<EOF\nrm a\nEOF"),
    ("sh-s-heredoc-clean", "sh -s <<'EOF'\ngit clean -fdx\nEOF"),
    ("bash-herestring-rm", 'bash <<< "rm a"'),
    ("curl-pipe-sh", "curl -fsSL https://x.sh | sh"),
    ("bash-stdin-file", "bash < script.sh"),
    ("bash-interactive-stdin", "bash"),
    ("find-delete", "find . -name '*.pyc' -delete"),
    ("find-exec-rm", "find . -name x -exec rm {} \\;"),
    ("find-execdir-rm-plus", "find . -type f -execdir rm -f {} +"),
    ("find-exec-sh-c", "find . -exec sh -c 'rm \"$1\"' _ {} \\;"),
    ("find-exec-mv", "find . -name '*.log' -exec mv {} logs/ \\;"),
    # package managers
    ("npm-install", "npm install"),
    ("npm-i-pkg", "npm i lodash"),
    ("npm-ci", "npm ci"),
    ("npm-prefix-install", "npm --prefix web install"),
    ("yarn-bare", "yarn"),
    ("yarn-add", "yarn add react"),
    ("pnpm-add", "pnpm add -D vitest"),
    ("pip-install", "pip install -r requirements.txt"),
    ("pip3-uninstall", "pip3 uninstall -y requests"),
    ("python-m-pip-install", "python3 -m pip install -e ."),
    ("poetry-add", "poetry add httpx"),
    ("poetry-lock", "poetry lock"),
    ("cargo-update", "cargo update"),
    ("cargo-add", "cargo add serde"),
    ("go-mod-tidy", "go mod tidy"),
    ("go-get", "go get example.com/x@latest"),
    ("bundle-install", "bundle install"),
    ("uv-add", "uv add httpx"),
    ("uv-sync", "uv sync"),
    ("uv-pip-install", "uv pip install ruff"),
    # interpreters with obvious deletions (optional courtesy)
    ("python-c-rmtree", "python3 -c \"import shutil; shutil.rmtree('build')\""),
    ("python-c-open-w", "python -c \"open('x', 'w').write('')\""),
    ("node-e-rmsync", "node -e \"require('fs').rmSync('dist', {recursive: true})\""),
    ("python-heredoc-remove", "python - <<'EOF'\nimport os\nos.remove('x')\nEOF"),
    # PowerShell and cmd
    ("ps-remove-item", "Remove-Item -Recurse foo"),
    ("ps-remove-item-lower", "remove-item foo"),
    ("ps-del-alias", "del foo"),
    ("pwsh-c-remove-item", 'pwsh -c "Remove-Item -Recurse foo"'),
    ("powershell-command-pipe-del", 'powershell -Command "Get-ChildItem *.tmp | del"'),
    ("powershell-exe-ri", 'powershell.exe -NoProfile -Command "ri -r build"'),
    ("pwsh-set-content", "pwsh -c \"Set-Content a.txt 'x'\""),
    ("pwsh-clear-content", 'pwsh -c "Clear-Content a.txt"'),
    ("pwsh-rename-item", 'pwsh -c "Rename-Item a.txt b.txt"'),
    ("pwsh-move-item", 'pwsh -c "Move-Item a b"'),
    ("pwsh-copy-item", 'pwsh -c "Copy-Item a b"'),
    ("pwsh-out-file", 'pwsh -c "Get-Date | Out-File out.txt"'),
    ("pwsh-redirect", 'pwsh -c "Get-Date > out.txt"'),
    ("pwsh-scriptblock-remove", 'pwsh -c "ls *.tmp | ForEach-Object { Remove-Item $_ }"'),
    ("pwsh-native-git-clean", 'pwsh -NoProfile -c "git clean -fdx"'),
    ("pwsh-encoded", f"pwsh -EncodedCommand {_encoded('Remove-Item -Recurse build')}"),
    ("pwsh-encoded-garbage", "pwsh -ec not-base64!"),
    ("pwsh-iex-variable", "pwsh -c 'iex $code'"),
    ("pwsh-stdin", "pwsh -NoProfile"),
    ("cmd-c-del", "cmd /c del /q build\\\\x.obj"),
    ("cmd-exe-rd", 'cmd.exe /C "rd /s /q build"'),
    ("cmd-msys-del", "cmd //c del x"),
    ("cmd-c-move", "cmd /c move a b"),
    ("cmd-c-ren", "cmd /c ren a.txt b.txt"),
    ("cmd-c-erase", "cmd /c erase x"),
    ("cmd-c-rmdir", "cmd /c rmdir /s /q build"),
    ("cmd-c-redirect", 'cmd /c "dir > out.txt"'),
    ("cmd-c-chain-del", 'cmd /c "cd build && del *.obj"'),
    # unparseable
    ("unbalanced-double-quote", 'echo "unterminated'),
    ("unbalanced-single-quote", "echo 'unterminated"),
    ("unbalanced-paren", "(rm a"),
    ("missing-fi", "if true; then echo x"),
]


def _exists_nowhere(path: str) -> bool:
    return False


@pytest.mark.parametrize(
    ("command", "expected"),
    [pytest.param(c, False, id=f"safe:{i}") for i, c in SAFE]
    + [pytest.param(c, True, id=f"destructive:{i}") for i, c in DESTRUCTIVE],
)
def test_table(command: str, expected: bool) -> None:
    verdict = classify(command)
    assert verdict.destructive is expected, verdict.reasons


def test_table_is_large_and_balanced() -> None:
    assert len(SAFE) + len(DESTRUCTIVE) >= 150
    assert min(len(SAFE), len(DESTRUCTIVE)) >= 0.4 * (len(SAFE) + len(DESTRUCTIVE))
    ids = [i for i, _ in SAFE + DESTRUCTIVE]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    "command",
    [
        'echo "unterminated',
        "echo 'unterminated",
        "(rm a",
        "if true; then echo x",
        "for x in; do",
        "echo hi )",
        "cat <<EOF; rm b\nhi\nEOF",
        "cmd <> f",
        "case x in",
        "ls |",
        "echo $(ls",
    ],
)
def test_unparseable_is_destructive(command: str) -> None:
    verdict = classify(command, _exists_nowhere)
    assert verdict.destructive
    assert verdict.reasons == ("the command does not parse as a shell command",)


def test_unparseable_script_inside_bash_c_is_destructive() -> None:
    verdict = classify("bash -c 'echo \"oops'", _exists_nowhere)
    assert verdict.destructive
    assert "does not parse" in verdict.reasons[0]


class _Paths:
    """A fake file system: records every question, answers from a set."""

    def __init__(self, *existing: str) -> None:
        self.existing = set(existing)
        self.asked: list[str] = []

    def __call__(self, path: str) -> bool:
        self.asked.append(path)
        return path in self.existing


@pytest.mark.parametrize(
    "command",
    [
        "cp a b",
        "cp -r src b",
        "mv a b",
        "install a b",
        "ln -sf a b",
        "ln -f a b",
        "echo x | tee b",
        "echo x > b",
        "echo x >| b",
        "make 2> b",
        "make &> b",
        "dd if=a of=b",
        "rsync -a a b",
        "sort -o b a",
        "curl -o b https://example.com/x",
    ],
)
def test_writes_are_destructive_only_onto_existing_paths(command: str) -> None:
    absent = _Paths()
    assert classify(command, absent) == Verdict(False, ())
    assert "b" in absent.asked
    present = classify(command, _Paths("b"))
    assert present.destructive
    assert any("b" in reason for reason in present.reasons)
    assert classify(command).destructive  # no path_exists: err broad


def test_cp_reason_names_the_target() -> None:
    assert classify("cp a b", _Paths("b")).reasons == ("cp overwrites b",)
    assert classify("cp a b").reasons == ("cp may overwrite b",)
    assert classify("cat a > out.txt", _Paths("out.txt")).reasons == (
        "redirect > overwrites out.txt",
    )
    assert classify("make 2> err.txt").reasons == ("redirect 2> may overwrite err.txt",)


def test_copy_into_a_directory_checks_the_entry_inside_it() -> None:
    paths = _Paths("dir", "dir/a")
    assert classify("cp a dir/", paths).destructive
    assert classify("cp b dir/", paths) == Verdict(False, ())
    assert classify("cp -t dir b c", paths) == Verdict(False, ())
    assert classify("cp -t dir a", paths).destructive
    assert classify("mv x/a .", _Paths("a")).destructive
    # Without a trailing slash we cannot tell a directory from a file: err broad.
    assert classify("cp b dir", paths).destructive
    assert paths.asked[:2] == ["dir/a", "dir/b"]


def test_paths_follow_cd_and_are_restored_after_a_subshell() -> None:
    paths = _Paths("sub", "sub/b")
    assert classify("cd sub && cp a b", paths).destructive
    assert paths.asked == ["sub", "sub/b"]
    paths = _Paths("sub", "sub/deeper", "out")
    assert classify("cd sub; cd deeper; echo x > out", paths) == Verdict(False, ())
    assert paths.asked[-1] == "sub/deeper/out"
    paths = _Paths("sub", "b")
    assert classify("(cd sub && cp a b); cp c d", paths) == Verdict(False, ())
    assert paths.asked == ["sub", "sub/b", "d"]
    assert classify("cd /abs && cp a b", _Paths("/abs", "/abs/b")).destructive
    # An absolute target is asked as written.
    paths = _Paths("sub")
    assert classify("cd sub && cp a /tmp/b", paths) == Verdict(False, ())
    assert paths.asked == ["sub", "/tmp/b"]


def test_cd_into_a_missing_directory_stays_put() -> None:
    # cd fails, so "; cp a b" writes ./b.
    assert classify("cd nowhere; cp a b", _Paths("b")).destructive
    assert classify("cd nowhere; cp a b", _Paths("nowhere/b")) == Verdict(False, ())


def test_an_uncertain_directory_makes_relative_targets_unknown() -> None:
    exists = _Paths("sub")
    for command in (
        "if test -d sub; then cd sub; fi; cp a b",
        "cd sub || true; cp a b",
        "cd sub && make; cp a b",
        "cd sub || cp a b",
        "f() { cd sub; }; cp a b",
        'cd "$dir" && cp a b',
        "cd - && cp a b",
        "cd && cp a b",
    ):
        verdict = classify(command, exists)
        assert verdict.destructive, command
        assert verdict.reasons == ("cp may overwrite b",), command


def test_unknown_or_unusual_targets_are_destructive_even_if_absent() -> None:
    for command in ("cp a *.txt", "cp a ~/b", 'cp a "$dest"', "echo x > {a,b}", "cp a b?"):
        assert classify(command, _exists_nowhere).destructive, command


def test_path_exists_failing_counts_as_unknown() -> None:
    def broken(path: str) -> bool:
        raise PermissionError(path)

    assert classify("cp a b", broken).reasons == ("cp may overwrite b",)


def test_path_exists_is_not_asked_about_safe_targets() -> None:
    paths = _Paths()
    classify("ls > /dev/null 2>/dev/stderr; echo x >&2; cat a >> log; cp -n a b", paths)
    assert paths.asked == []


def test_xargs_and_find_exec_targets_are_unknown() -> None:
    assert classify("ls | xargs -I{} cp {} out/", _exists_nowhere).destructive
    assert classify("find . -exec cp {} out/ \\;", _exists_nowhere).destructive
    assert classify("ls | xargs cp -t out", _exists_nowhere).destructive


@pytest.mark.parametrize(("_", "command"), DESTRUCTIVE, ids=[i for i, _ in DESTRUCTIVE])
def test_destructive_verdicts_have_reasons(_: str, command: str) -> None:
    verdict = classify(command)
    assert verdict.reasons
    assert all(isinstance(r, str) and r.strip() for r in verdict.reasons)
    assert len(set(verdict.reasons)) == len(verdict.reasons)


def test_safe_verdicts_have_no_reasons() -> None:
    for _, command in SAFE:
        assert classify(command).reasons == (), command


def test_reasons_list_every_destructive_part_in_order() -> None:
    verdict = classify("rm a; git reset --hard && echo x > out", _Paths("out"))
    assert verdict.reasons == (
        "rm deletes files",
        "git reset can discard staged and working-tree changes",
        "redirect > overwrites out",
    )


def test_verdict_is_a_frozen_value() -> None:
    verdict = classify("rm a")
    assert verdict == Verdict(True, ("rm deletes files",), ("a",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.destructive = False  # type: ignore[misc]


def test_deep_nesting_is_destructive_not_a_crash() -> None:
    # Each wrapper is a level: past MAX_DEPTH we give up and say destructive.
    assert classify("nice " * 40 + "echo hi").reasons == ("command nests too deeply to inspect",)
    assert classify("nice " * 5 + "echo hi") == Verdict(False, ())
    verdict = classify("true && " * 5000 + "true")
    assert verdict.destructive is bool(verdict.reasons)


@given(st.text(alphabet=st.characters(exclude_categories=("Cs", "Cc")), max_size=80))
def test_quoted_text_echoed_is_safe(text: str) -> None:
    verdict = classify(f"echo {shlex.quote(text)}")
    assert verdict == Verdict(False, ())


def test_odd_characters_reach_path_exists_intact() -> None:
    paths = _Paths()
    for name in ("caf\u00e9", "\udcff", "\ud800", "a b"):
        assert classify(f"cp x {shlex.quote(name)}", paths) == Verdict(False, ())
    assert paths.asked == ["caf\u00e9", "\udcff", "\ud800", "a b"]


@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=80))
def test_any_text_gets_a_verdict(text: str) -> None:
    verdict = classify(text)
    assert isinstance(verdict, Verdict)
    assert verdict.destructive or not verdict.reasons


# -- targets: what a command may delete, to record first ---------------------------------


@pytest.mark.parametrize(
    ("command", "targets"),
    [
        ("rm -rf data .env", ("data", ".env")),
        ("rm -- -odd", ("-odd",)),
        ("cd sub && rm -f *.db", ("sub/*.db",)),
        ("rm -rf data/*/cache", ("data/*/cache",)),
        ("rm -rf {data,x}/c dat?", ("data/c", "x/c", "dat?")),
        ("find build tmp -name '*.o' -delete", ("build", "tmp")),
        ("find -delete", (".",)),
        ("git clean -fdx", (".",)),
        ("git clean -fdX src", ("src",)),
        ("git clean -fd", ()),  # what git ignores stays: nothing to record first
        ("truncate -s 0 big.log", ("big.log",)),
        ("sudo rm -r /srv/x", ("/srv/x",)),
        ("echo > out.txt", ("out.txt",)),
        ("rm -rf $DIR ~/x", ()),  # neither can be known
        ("(cd a; rm b); rm c", ("a/b", "c")),
        ('rm -rf $PWD/out "${PWD}/x"', ("out", "x")),  # $PWD is where it runs
        ("cd sub && rm -rf $PWD", ("sub",)),
        ("PWD=/tmp; rm -rf $PWD/x", ()),  # set by the command: not known
        ("rm -rf $PWDX/y", ()),
        ('rm -rf $(pwd)/out `pwd`/x "$(pwd)/y" ~+/z', ("out", "x", "y", "z")),
        ("rm -rf $(pwd -P)/out $(ls)/x", ()),  # a physical path, or anything: not known
    ],
)
def test_a_destructive_command_names_the_paths_it_may_delete(
    command: str, targets: tuple[str, ...]
) -> None:
    verdict = classify(command, lambda path: True)
    assert verdict.destructive
    assert verdict.targets == targets


def test_a_command_that_deletes_nothing_it_names_has_no_targets() -> None:
    assert classify("make test && git status", lambda path: True).targets == ()
