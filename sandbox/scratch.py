"""Scratch directories: one per child, made before its fork and removed after it was reaped.

With the scratch_tmpfs layer they live on a size- and inode-limited tmpfs of the worker's
own, mounted in the zygote's private mount namespace, and every child gets a fresh one:
after a child is reaped its tmpfs is unmounted (not walked) and a new one mounted in its
place (no other child's directory is on it: the zygote reaps a child before it starts the
next). Whatever the child left there, however deep, goes with the old mount, and so does
the tmpfs's inode counter: every child's directory, and the files it makes, get the same
inode numbers whatever earlier children made (a shared tmpfs would hand the next child
numbers shifted by the files an earlier one created, even deleted ones).

Without that layer (no root, no user namespace, or the layer off) a directory that is
not empty is removed by ``remove_tree``, which holds a constant number of file
descriptors at any depth (the zygote runs under RLIMIT_NOFILE=64), never follows a
symlink and refuses to cross a mount.
"""
from __future__ import annotations

import os

from . import namespaces

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Scratch:
    """The zygote's scratch dirs under ``base``: ``make`` one per child, ``remove`` it after."""

    def __init__(self, base: str, size_mb: int, inodes: int, owner: int | None):
        self.base = base
        self.size_mb = size_mb
        self.inodes = inodes
        self.owner = owner      # the children's uid (None: the zygote's own)
        self.tmpfs = False
        self.remounts = 0

    def mount(self) -> None:
        """Put a fresh tmpfs on ``base`` (in the zygote's private mount namespace)."""
        namespaces.mount_tmpfs(self.base, self.size_mb, self.inodes)
        self.tmpfs = True

    def make(self, name: str) -> str:
        path = f"{self.base}/{name}"
        os.mkdir(path, 0o700)
        if self.owner is not None:
            try:
                os.chown(path, self.owner, self.owner)
            except BaseException:
                os.rmdir(path)
                raise
        return path

    def remove(self, path: str) -> None:
        """Remove a reaped child's dir (on the tmpfs: replace the tmpfs); raise OSError if
        anything of it is left."""
        if self.tmpfs:
            # A plain unmount (the child is reaped, so nothing holds the mount), else a lazy one.
            if not namespaces.umount(self.base):
                namespaces.umount_detached(self.base)
            self.tmpfs = False
            self.mount()
            self.remounts += 1
            return
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
