"""Folder watching: keep a corpus in sync with folders while their files change.

`watchfiles` (the operating system's change notifications: inotify, FSEvents,
ReadDirectoryChangesW) reports changes in debounced batches. Each batch becomes one call of
`sync` with the folders it touched, and `sync` runs the ordinary incremental ingest with
pruning over them (`Engine.ingest(folders, prune=True)`, or the service's writer job). So
nothing about indexing is decided here: unchanged files are skipped by size, mtime and content
hash, new and edited files are indexed, a renamed file is indexed under its new name and
dropped under its old one, and the document of a removed file is deleted only after the folder
that held it was listed completely. Hidden entries are ignored, as the ingest walk skips them.

A watched folder that is gone (deleted, moved away, or an unmounted share: a folder that was a
mount point when watching began and no longer is) is never synced, so its documents are kept;
the watcher says so once and, when the folder is back, watches it again and syncs it in full.
The operating system cannot report a folder coming back (there is nothing left to watch), so
the watched folders themselves are checked on the watcher's idle tick: a stat of each one,
never a scan of their files.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import watchfiles

Sync = Callable[[list[Path]], None]
Notice = Callable[[str], None]

# Changes are gathered this long (ms) before a sync, so an editor's save or a copied folder
# arrives as one batch.
DEBOUNCE_MS = 1600
# A batch is closed once no change came for this long (ms).
STEP_MS = 50
# The idle tick (ms): how often the watched folders themselves are checked when nothing changes.
RECHECK_MS = 1000


@dataclass(frozen=True)
class WatchedFolder:
    """A folder given to watch, resolved, and whether it was a mount point when watching began
    (an unmounted share leaves an empty folder behind that must not read as deleted files)."""

    path: Path
    mount_point: bool

    @classmethod
    def of(cls, folder: Path) -> WatchedFolder:
        path = folder.expanduser().resolve()
        return cls(path, os.path.ismount(path))

    def reachable(self) -> bool:
        """There, a folder, and still mounted if it was a mount point."""
        return self.path.is_dir() and (not self.mount_point or os.path.ismount(self.path))

    def holds(self, path: Path) -> bool:
        return path == self.path or path.is_relative_to(self.path)


class FolderWatcher:
    """Calls `sync(folders)` for every debounced batch of changes under `folders` until
    `stop()`; `notice` hears of folders that are gone (a folder missing from the start too)
    or back. Ctrl+C propagates from `run`."""

    def __init__(self, folders: Sequence[Path], sync: Sync, *, notice: Notice) -> None:
        self.folders = [WatchedFolder.of(folder) for folder in folders]
        self.sync = sync
        self.notice = notice
        self.stop_event = threading.Event()
        self._gone: set[Path] = set()
        self._pending: set[Path] = set()

    def run(self) -> None:
        """Sync every folder once (after its watch is set up, so no change slips between the
        two), then follow the changes until `stop()`."""
        self._pending = {folder.path for folder in self.folders}
        self._check_folders()
        while not self.stop_event.is_set():
            present = [f.path for f in self.folders if f.path not in self._gone]
            try:
                self._follow(present)
            except FileNotFoundError:  # a folder vanished while its watch was being set up
                self._check_folders()
                self.stop_event.wait(RECHECK_MS / 1000)

    def stop(self) -> None:
        self.stop_event.set()

    def _follow(self, present: list[Path]) -> None:
        """One watch over the `present` folders; returns when one that was gone is back, so
        that the next watch covers it too (its full sync waits for that watch)."""
        for changes in watchfiles.watch(
            *present,
            watch_filter=self._relevant,
            debounce=DEBOUNCE_MS,
            step=STEP_MS,
            stop_event=self.stop_event,
            rust_timeout=RECHECK_MS,
            yield_on_timeout=True,
            ignore_permission_denied=True,  # an unreadable subfolder: the ingest reports it
        ):
            came_back = self._check_folders()
            self._pending.update(self._folders_to_list(changes))
            if came_back:
                return
            self._sync_pending()

    def _check_folders(self) -> bool:
        """Say which watched folders went away or came back; True when one came back."""
        came_back = False
        for folder in self.folders:
            there = folder.reachable()
            if not there and folder.path not in self._gone:
                self._gone.add(folder.path)
                self.notice(
                    f"{folder.path} is gone (deleted, moved or unmounted): its documents are "
                    "kept, and it is synced again when it is back"
                )
            elif there and folder.path in self._gone:
                self._gone.discard(folder.path)
                self._pending.add(folder.path)
                self.notice(f"{folder.path} is back: syncing it")
                came_back = True
        return came_back

    def _sync_pending(self) -> None:
        """Sync the touched folders of watched folders that are there; those of a gone one are
        dropped (it is synced in full when it is back)."""
        folders = outermost(p for p in self._pending if self._watched_and_there(p))
        self._pending.clear()
        if folders:
            self.sync(folders)

    def _folders_to_list(self, changes: Iterable[tuple[watchfiles.Change, str]]) -> set[Path]:
        """For each change, the folder whose listing shows it: the changed path if it is a
        folder, else the nearest folder above it (a removed file or folder shows as missing)."""
        touched = set()
        for _change, raw in changes:
            path = Path(raw)
            if owner := self._owner(path):
                touched.add(nearest_folder(path, owner.path))
        return touched

    def _relevant(self, _change: watchfiles.Change, raw: str) -> bool:
        """Changes inside a watched folder and not under a hidden name (the walk skips those)."""
        path = Path(raw)
        owner = self._owner(path)
        if owner is None:
            return False
        return not any(part.startswith(".") for part in path.relative_to(owner.path).parts)

    def _watched_and_there(self, path: Path) -> bool:
        owner = self._owner(path)
        return owner is not None and owner.path not in self._gone

    def _owner(self, path: Path) -> WatchedFolder | None:
        """The innermost watched folder holding `path` (watched folders may nest)."""
        holders = [f for f in self.folders if f.holds(path)]
        return max(holders, key=lambda f: len(f.path.parts), default=None)


def nearest_folder(path: Path, top: Path) -> Path:
    """`path` if it is a real folder (not a link to one), else the nearest such folder above
    it, never above `top`."""
    for candidate in (path, *path.parents):
        if candidate == top or (candidate.is_dir() and not candidate.is_symlink()):
            return candidate
    return top


def outermost(folders: Iterable[Path]) -> list[Path]:
    """The folders not inside another one of them (listing those lists the rest), in order."""
    kept: list[Path] = []
    for folder in sorted(set(folders), key=lambda p: (len(p.parts), p)):
        if not any(folder.is_relative_to(outer) for outer in kept):
            kept.append(folder)
    return kept
