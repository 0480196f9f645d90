"""Scratch directories: one per child, made before its fork and removed after it was reaped.

With the scratch_tmpfs layer each one is a tmpfs of its own (size and inode limits per
child), mounted in the zygote's private mount namespace and lazily unmounted afterwards:
whatever the child left there, however deep, goes with the mount; nothing is walked.
Without it (no root, no user namespace, or the layer off) a plain directory is removed by
``remove_tree``, which holds a constant number of file descriptors at any depth (the
zygote runs under RLIMIT_NOFILE=64) and never follows a symlink or crosses a mount.
"""
from __future__ import annotations

import os

from . import namespaces

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def make(path: str, tmpfs: bool, size_mb: int, inodes: int, owner: int | None) -> None:
    """Create ``path`` for a child that runs as ``owner`` (None: the zygote's own uid)."""
    os.mkdir(path, 0o700)
    try:
        if tmpfs:
            namespaces.mount_tmpfs(path, size_mb, inodes, mode="0700", owner=owner)
        elif owner is not None:
            os.chown(path, owner, owner)
    except BaseException:
        os.rmdir(path)
        raise


def remove(path: str, tmpfs: bool) -> None:
    """Remove a child's scratch dir; raise OSError if anything of it is left."""
    if tmpfs:
        namespaces.umount_detached(path)
    try:
        os.rmdir(path)
        return
    except FileNotFoundError:
        return
    except OSError:
        pass
    remove_tree(path)


def remove_tree(path: str) -> None:
    """Remove the directory tree at ``path``, any depth, with O(1) file descriptors.

    Walks down one directory at a time (closing the parent), deletes the files of the
    directory it is in, and climbs back with ``..`` to rmdir the emptied one; a stack of
    names, not of descriptors, records the way down. Raises OSError if something stays.
    """
    fd = os.open(path, _DIR)
    top_dev = os.fstat(fd).st_dev
    names: list[str] = []
    try:
        while True:
            sub = _clear_files(fd)
            if sub is not None:
                try:
                    os.chmod(sub, 0o700, dir_fd=fd)   # a directory (checked without following links)
                except OSError:
                    pass
                child = os.open(sub, _DIR, dir_fd=fd)
                if os.fstat(child).st_dev != top_dev:
                    os.close(child)
                    raise OSError(f"a mount point inside {path}: {sub}")
                os.close(fd)
                fd = child
                names.append(sub)
                continue
            if not names:
                break
            parent = os.open("..", _DIR, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(path)


def _clear_files(fd: int) -> str | None:
    """Unlink every entry of directory ``fd`` that is not a directory; return a subdirectory's
    name, or None when the directory is now empty."""
    try:
        os.chmod(fd, 0o700)   # the child may have made it read-only
    except OSError:
        pass
    with os.scandir(fd) as it:
        entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    sub = None
    for name, is_dir in entries:
        if is_dir:
            sub = sub or name
            continue
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
    return sub
