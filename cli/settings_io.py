"""Reading and writing an agent's settings files for ``earshot install``: safely.

An agent's settings (JSON, or Codex's ``config.toml``) belong to the person:

- A file is opened without waiting (a FIFO is refused, never read), and
  only a regular file is read.
- A settings file that is a link (kept with someone's dotfiles) is read and
  written where it leads, and stays a link; but a link to nothing, or (for
  a project's settings) a link leading out of the project, is refused: a
  repository could ship one to have earshot write a file anywhere.
- Before earshot first changes a file, its bytes are kept beside it as
  ``FILE.earshot.bak``: one backup, the file before earshot, never
  overwritten while it is there. An uninstall that leaves the file meaning
  what the backup holds puts the backup's bytes back and removes it. The
  new text goes to a temp file renamed over it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from earshot.cas.errors import EarshotError


class SettingsError(EarshotError):
    """A settings file earshot will not read or write; nothing was written."""

    def __init__(self, path: Path | str, why: str) -> None:
        super().__init__(f"{path}: {why}; nothing was written")
        self.path = str(path)
        self.why = why


class PartlyWritten(EarshotError):
    """A file earshot could not write after it wrote the settings file."""

    def __init__(self, failed: SettingsError, written: Path) -> None:
        super().__init__(
            f"{failed.path}: {failed.why}; {written} was written already "
            "(run the command again once this is fixed)"
        )


def leads_out(path: Path, inside: Path) -> Path | None:
    """Where ``path`` really is when a link on the way (any of its directories,
    or itself) takes it out of ``inside``; None when it stays in."""
    target = Path(os.path.realpath(path))
    top = Path(os.path.realpath(inside))
    return None if target == top or top in target.parents else target


def real_file(path: Path, inside: Path | None) -> Path:
    """Where ``path`` leads: itself, or a link's existing target; within ``inside``,
    whichever of its directories is a link."""
    if inside is not None and (out := leads_out(path, inside)) is not None:
        raise SettingsError(path, f"a link out of the project (to {out}); not followed")
    if not path.is_symlink():
        return path
    target = Path(os.path.realpath(path))
    if not target.exists():
        raise SettingsError(path, f"a link to {target}, which does not exist; not followed")
    return target


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes; None when there is none. A FIFO, device or directory is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsError(path, f"cannot read it ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SettingsError(path, "not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise SettingsError(path, f"cannot read it ({exc.strerror})") from None
    finally:
        os.close(fd)


def read_text(path: Path) -> str | None:
    data = read_bytes(path)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(path, f"not UTF-8 text (byte {exc.start})") from None


def backup_of(path: Path) -> Path:
    """Where the file as it was before earshot first changed it is kept."""
    return path.with_name(f"{path.name}.earshot.bak")


def _keep(path: Path, old: bytes) -> str | None:
    """Keep ``old`` (the file as read) as its backup, unless a backup is there
    already: the first one stays, the file before earshot changed it."""
    name = backup_of(path)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return None
    with os.fdopen(fd, "wb") as out:
        out.write(old)
    return str(name)


def write_bytes(path: Path, data: bytes, old: bytes | None) -> str | None:
    """Replace ``path`` (already ``real_file``) with ``data``; the backup made of
    ``old``, if one was made."""
    backup = None
    temp = path.with_name(f".{path.name}.earshot-tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = 0o644
        if old is not None:
            backup = _keep(path, old)
            mode = path.stat().st_mode & 0o7777
        fd = os.open(
            temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        if backup is not None:
            Path(backup).unlink(missing_ok=True)
        raise SettingsError(
            exc.filename or path, f"cannot write it ({exc.strerror or exc})"
        ) from None
    return backup


def restore_backup(path: Path, same: bool) -> bool:
    """Put the backup's bytes back at ``path`` and remove the backup, when ``same``
    (what is to be written means what the backup holds); whether it did."""
    backup = backup_of(path)
    if not same:
        return False
    data = read_bytes(backup)
    if data is None:
        return False
    write_bytes(path, data, None)
    backup.unlink(missing_ok=True)
    return True


def saved_backup(path: Path) -> bytes | None:
    """The backup's bytes; None when there is none, or none earshot can read."""
    try:
        return read_bytes(backup_of(path))
    except SettingsError:
        return None


def remove_file(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise SettingsError(path, f"cannot remove it ({exc.strerror})") from None
