"""Getting real dataset files onto disk, verified, or failing with instructions.

Nothing is downloaded unless a dataset spec says ``download: true``: cluster nodes often have no
internet and a silent multi-gigabyte download inside a training job is worse than an immediate
error that names the file to put in place. Downloads go to a hidden partial file in the
destination folder, resume from it after an interruption, and are renamed only after their
SHA-256 matched, so an interrupted or tampered download never looks like a usable file.
Archives are extracted alike (:func:`extracting`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
_CHUNK = 1 << 20


class DatasetUnavailable(FileNotFoundError):
    """A dataset's files are not on disk (and were not, or could not be, downloaded)."""


class NotTheFile(OSError):
    """A server answered with something other than the file (a web page: a moved link, a
    login or an error page); an OSError, so that a loader with mirrors tries the next."""


def _not_the_file(path: Path, archive: bool) -> str | None:
    """What is wrong with a file that has no published checksum, or None: a web page is never
    a dataset file, and an ``archive`` must be one that :mod:`tarfile` opens."""
    import tarfile

    with open(path, "rb") as handle:
        head = handle.read(512).lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")):
        return "a web page"
    if archive and not tarfile.is_tarfile(path):
        return f"not a tar archive (it begins {head[:16]!r})"
    return None


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold ``folder``'s lock: dataset jobs run side by side on the submit host, and two that
    fill one folder (two studies' CIFAR-10, CINIC-10's test and train parts from one archive)
    would otherwise write the same files at once. The lock is the operating system's
    (``flock``), released when its holder exits, killed or not."""
    import fcntl

    try:  # beside the folder, not in it, where a loader listing its files would find it
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder.parent / f".{folder.name}.lock", "a")  # held across the yield
    except OSError:  # a read-only shared folder: no job writes there, so none to wait for
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def extracting(folder: Path) -> Iterator[Path]:
    """A scratch folder inside ``folder`` to extract an archive into, under ``folder``'s lock
    (:func:`locked`): what it holds is moved into ``folder`` only once extraction finished,
    so that a job killed mid-way (a node's time limit) leaves no half-filled image folder that
    the loaders would read as complete; a scratch folder left by such a job is cleared first,
    which the lock makes safe from a job extracting there now."""
    with locked(folder):
        scratch = folder / ".extracting"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        try:
            yield scratch
            for entry in scratch.iterdir():
                if not (folder / entry.name).exists():
                    os.replace(entry, folder / entry.name)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def sha256_of(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 digest of a file, read in chunks so large archives fit in memory."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _mismatch(path: Path, expected: str, actual: str, url: str | None = None) -> ValueError:
    origin = f" (downloaded from {url})" if url else ""
    return ValueError(f"checksum mismatch for {path}{origin}: expected sha256 {expected}, "
                      f"got {actual}")


def verify_sha256(path: str | os.PathLike[str], sha256: str) -> None:
    """Raise ValueError naming the file and both digests unless ``path`` has ``sha256``."""
    actual = sha256_of(path)
    if actual != sha256.lower():
        raise _mismatch(Path(path), sha256.lower(), actual)


def fetch(url: str, destination: str | os.PathLike[str], sha256: str | None,
          timeout: float = 60.0, archive: bool = False) -> Path:
    """Download ``url`` to ``destination``, resuming an interrupted download, verifying its
    SHA-256 when one is known.

    The bytes go to ``.<name>.part`` beside ``destination``, renamed only once the whole file
    is there and its digest matched. A download cut off (network error, killed job) leaves
    that partial file, and the next call asks the server for the rest (an HTTP Range request;
    a server that ignores it sends the whole file again). A checksum mismatch deletes it.
    ``sha256=None`` is allowed for sources whose digest could not be confirmed; the digest of
    what arrived is then logged so that it can be pinned, and what arrived must not be a web
    page (nor, for an ``archive``, anything but a tar archive): a moved link answers with one,
    which would otherwise be kept as the dataset (:class:`NotTheFile`). Two jobs fetching one
    file take turns (a lock on the partial file): the second finds the file in place.
    """
    import fcntl

    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = destination.with_name(f".{destination.name}.part")
    with open(partial, "ab") as out:
        fcntl.flock(out, fcntl.LOCK_EX)
        if destination.exists():  # another job fetched it while this one waited
            if out.tell() == 0:
                partial.unlink(missing_ok=True)
            return destination
        _download(url, out, timeout)
        actual = sha256_of(partial)
        if sha256 is None:
            if (wrong := _not_the_file(partial, archive)) is not None:
                partial.unlink()
                raise NotTheFile(f"{url} sent {wrong}, not {destination.name}: the link may "
                                 "have moved")
            log.warning("no checksum pinned for %s; the downloaded file has sha256 %s",
                        url, actual)
        elif actual != sha256.lower():
            partial.unlink()
            raise _mismatch(destination, sha256.lower(), actual, url)
        os.replace(partial, destination)
    log.info("downloaded %s to %s", url, destination)
    return destination


def _download(url: str, out: Any, timeout: float) -> None:
    """Append the rest of ``url`` to ``out`` (open for appending at its end)."""
    offset = out.tell()
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                          timeout=timeout)
    except urllib.error.HTTPError as error:
        if error.code == 416 and offset:  # nothing left to send: the file is complete
            return
        raise
    with response:
        if offset and getattr(response, "status", None) != 206:
            log.info("%s sends the whole file again (no resume); starting over", url)
            out.truncate(0)
        elif offset:
            log.info("resuming %s at byte %d", url, offset)
        while chunk := response.read(_CHUNK):
            out.write(chunk)
        out.flush()


def require_file(path: str | os.PathLike[str], sha256: str | None = None,
                 how_to_get: str = "", archive: bool = False) -> Path:
    """Return ``path`` if it exists and is the file expected, else raise DatasetUnavailable.

    The message names the exact path expected, where to get the file and its checksum, so a
    user on an offline machine can copy it into place without reading the code. A file with no
    published checksum is trusted on first use: its digest is recorded beside it
    (``<file>.sha256``) and every later use verifies against that record, so a file that
    changes or is truncated afterwards is caught. A web page saved in its place (or, for an
    ``archive``, anything but a tar archive) is refused first, never recorded.
    """
    path = Path(path)
    if not path.is_file():
        lines = [f"dataset file not found: {path}"]
        if how_to_get:
            lines.append(f"  how to get it: {how_to_get}")
        lines.append(f"  expected sha256: {sha256 or 'not published; recorded at first use'}")
        raise DatasetUnavailable("\n".join(lines))
    if sha256 is not None:
        verify_sha256(path, sha256)
        return path
    record = path.with_name(path.name + ".sha256")
    actual = sha256_of(path)
    if not record.exists():
        if (wrong := _not_the_file(path, archive)) is not None:
            raise DatasetUnavailable(f"{path} is {wrong}, not the dataset file: delete it and "
                                     f"get the file again" + (f": {how_to_get}" if how_to_get
                                                              else ""))
        from miarepro import io  # atomic: a record cut short would read as a changed file

        try:
            io.write_text(record, actual + "\n")
        except PermissionError:  # a shared, read-only data folder: use the file unrecorded
            log.warning("cannot record the sha256 %s of %s beside it (read-only folder): "
                        "later changes to it will not be noticed", actual, path)
        else:
            log.info("recorded sha256 %s of %s in %s (no published checksum)", actual, path,
                     record)
    elif record.read_text().strip() != actual:
        raise ValueError(f"{path} changed since its first use: sha256 {actual}, recorded "
                         f"{record.read_text().strip()} in {record}. If you replaced the file "
                         f"on purpose, delete {record}; otherwise get the file again.")
    return path
