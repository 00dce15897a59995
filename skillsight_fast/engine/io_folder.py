"""The index folder on disk: the save lock, the atomic swap of a new version into place, recovery after a
crash, side files written beside the index, and a folder pinned to one version while it is read
(:mod:`skillsight_fast.engine.io` reads and writes what is inside)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from skillsight_fast.errors import IndexFormatError
from skillsight_fast.files import (
    atomic_write_bytes,
    fsync_dir,
)

logger = logging.getLogger(__name__)

#: The index folder's manifest.
MANIFEST = "manifest.json"
#: Optional: one JSON string (the skill's Markdown body) per row; read on demand by read_bodies().
TEXTS = "texts.jsonl"
#: The folder inside an index holding its static model (the static tiers' tokenizer and token table),
#: so the index does not depend on the builder's cache: the manifest's config names it relatively.
STATIC_MODEL_DIR = "static_model"


def check_index_target(directory: str | os.PathLike[str]) -> Path:
    """The folder a save into ``directory`` will write (a symlink's target), checked before any work.

    ``skillsight index`` calls it before encoding, so a bad output path fails in a second, not
    after minutes of encoding.

    Raises
    ------
    IndexFormatError
        ``directory`` is a file, or a non-empty folder that holds no index.
    OSError
        A parent is a regular file, or the nearest existing parent is not writable.
    """
    path = Path(directory).expanduser().absolute()
    if path.is_symlink():  # save into the link's target: the link stays, no stray temp link
        path = Path(os.path.realpath(path))
    if path.exists() and not path.is_dir():
        raise IndexFormatError(f"{path} exists and is not a folder")
    if path.is_dir() and any(path.iterdir()) and not (path / MANIFEST).is_file():
        raise IndexFormatError(f"{path} is a non-empty folder that holds no index; refusing to overwrite it")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OSError(errno.ENOTDIR, "a parent of the index folder is not a folder", str(parent))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OSError(errno.EACCES, "cannot create the index folder here (permission denied)", str(parent))
    return path


def _save_error(directory: Path, exc: OSError) -> OSError:
    """One clear ``OSError`` for a failed save (numpy's short write says only "N requested and M written")."""
    reason = exc.strerror
    if not reason:
        try:
            free = f"{shutil.disk_usage(directory.parent).free:,} bytes free"
        except OSError:
            free = "free space unknown"
        reason = f"a write was cut short: the disk is full or a file size limit was reached ({free}; {exc})"
    return OSError(exc.errno or errno.ENOSPC, f"cannot save the index {directory}: {reason}; the previous "
                   "index, if any, is unchanged")


def _check_side_file_name(name: str) -> None:
    """A side file must be a plain name that no part of the index format uses."""
    if (not name or "/" in name or "\\" in name or name.startswith((".", "scan_")) or name.endswith(".npy")
            or name in (MANIFEST, "vocab.json", "skills.jsonl", TEXTS, STATIC_MODEL_DIR)):
        raise ValueError(f"extra file name {name!r} is not a plain, free file name")


def write_index_file(directory: Path, name: str, data: bytes) -> Path:
    """Write one small side file (e.g. ``calibration.json``) into an existing index folder.

    Written to a temporary file and renamed, under the same lock as :func:`save_index`, so a
    concurrent save or update cannot swap the folder away in between and drop the file.
    """
    directory = directory.expanduser().absolute()
    _check_side_file_name(name)
    with _save_lock(directory.parent):
        if not (directory / MANIFEST).is_file():
            raise IndexFormatError(f"{directory}: not an index folder")
        atomic_write_bytes(directory / name, data)
    return directory / name


@contextlib.contextmanager
def _save_lock(parent: Path, *, shared: bool = False) -> Iterator[None]:
    """Advisory lock on the index's parent folder (a no-op where flock is missing).

    Saves take it exclusively; a load that lost its races takes it shared.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    try:
        fd = os.open(parent, os.O_RDONLY)
    except OSError:  # pragma: no cover - unreadable parent: save without the lock
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _remove_leftovers(directory: Path) -> None:
    """Delete temporary and renamed-away folders left by crashed saves (called under the lock)."""
    for pattern in (f".{directory.name}.tmp-*", f".{directory.name}.old-*"):
        for stale in directory.parent.glob(pattern):
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths (Linux ``renameat2``); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # pragma: no cover - libc without renameat2
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):  # pragma: no cover
        return False
    raise OSError(err, os.strerror(err), str(b))  # pragma: no cover


def _swap_in(tmp: Path, directory: Path) -> None:
    """Replace ``directory`` by ``tmp``; the old index survives until the swap."""
    if directory.exists() and _exchange(tmp, directory):
        fsync_dir(directory.parent)
        shutil.rmtree(tmp, ignore_errors=True)  # now holds the old index
    elif directory.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old-", dir=directory.parent))
        old.rmdir()
        os.rename(directory, old)
        try:
            os.rename(tmp, directory)
        except BaseException:
            os.rename(old, directory)
            raise
        fsync_dir(directory.parent)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, directory)
        fsync_dir(directory.parent)


def recover(directory: Path) -> None:
    """If a crash left only the renamed-away old index, put it back."""
    if directory.exists() or not directory.parent.is_dir():
        return
    with _save_lock(directory.parent):  # a live save may be between its two renames: wait for it
        _recover_unlocked(directory)


def _recover_unlocked(directory: Path) -> None:
    if directory.exists():
        return
    olds = []
    for p in directory.parent.glob(f".{directory.name}.old-*"):
        with contextlib.suppress(OSError):
            if (p / MANIFEST).is_file():
                olds.append((p.stat().st_mtime, p))
    if olds:
        with contextlib.suppress(OSError):
            os.rename(max(olds)[1], directory)


def _identity(directory: Path) -> tuple[int, ...] | None:
    try:
        st, man = os.stat(directory), os.stat(directory / MANIFEST)
        return st.st_dev, st.st_ino, man.st_ino, man.st_mtime_ns, man.st_ctime_ns
    except OSError:
        return None


#: Loads retried without a lock when a save swapped the folder mid-read; the last attempt reads
#: under a shared lock that saves wait for, so a reader racing a stream of saves still finishes.
_LOAD_ATTEMPTS = 4
_PROC_FD = Path("/proc/self/fd")


@contextlib.contextmanager
def _pinned(directory: Path) -> Iterator[tuple[Path, tuple[int, int] | None]]:
    """The folder as one fixed version: a path through an open descriptor of its inode (Linux).

    A save replaces the folder by renames, never in place, so every file read through the
    descriptor belongs to the same index even while a save swaps a new one in. Yields the
    folder itself and ``None`` where descriptors cannot be used as paths.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        yield directory, None
        return
    try:
        st = os.fstat(fd)
        base = _PROC_FD / str(fd)
        yield (base, (st.st_dev, st.st_ino)) if (base / MANIFEST).is_file() else (directory, None)
    finally:
        os.close(fd)


def _still_there(directory: Path, pinned: tuple[int, int]) -> bool:
    try:
        st = os.stat(directory)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == pinned
