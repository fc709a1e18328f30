"""Getting real dataset files onto disk, verified, or failing with instructions.

Nothing is downloaded unless a dataset spec says ``download: true``: cluster nodes often have no
internet and a silent multi-gigabyte download inside a training job is worse than an immediate
error that names the file to put in place. Downloads go to a temporary name in the destination
folder and are renamed only after their SHA-256 matched, so an interrupted or tampered download
never looks like a usable file.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import urllib.request
from pathlib import Path

log = logging.getLogger(__name__)
_CHUNK = 1 << 20


class DatasetUnavailable(FileNotFoundError):
    """A dataset's files are not on disk (and were not, or could not be, downloaded)."""


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
          timeout: float = 60.0) -> Path:
    """Download ``url`` to ``destination`` atomically, verifying its SHA-256 when one is known.

    ``sha256=None`` is allowed for sources whose digest could not be confirmed; the digest of
    what arrived is then logged so that it can be pinned. On any failure (network error,
    checksum mismatch, interruption) no file is left behind at or next to ``destination``.
    """
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=destination.parent,
                                         prefix=f".{destination.name}.", suffix=".part")
    try:
        digest = hashlib.sha256()
        with (os.fdopen(handle, "wb") as out,
              urllib.request.urlopen(url, timeout=timeout) as response):
            while chunk := response.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
        actual = digest.hexdigest()
        if sha256 is None:
            log.warning("no checksum pinned for %s; the downloaded file has sha256 %s",
                        url, actual)
        elif actual != sha256.lower():
            raise _mismatch(destination, sha256.lower(), actual, url)
        os.replace(temporary, destination)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    log.info("downloaded %s to %s", url, destination)
    return destination


def require_file(path: str | os.PathLike[str], sha256: str | None = None,
                 how_to_get: str = "") -> Path:
    """Return ``path`` if it exists and is the file expected, else raise DatasetUnavailable.

    The message names the exact path expected, where to get the file and its checksum, so a
    user on an offline machine can copy it into place without reading the code. A file with no
    published checksum is trusted on first use: its digest is recorded beside it
    (``<file>.sha256``) and every later use verifies against that record, so a file that
    changes or is truncated afterwards is caught.
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
        record.write_text(actual + "\n")
        log.info("recorded sha256 %s of %s in %s (no published checksum)", actual, path, record)
    elif record.read_text().strip() != actual:
        raise ValueError(f"{path} changed since its first use: sha256 {actual}, recorded "
                         f"{record.read_text().strip()} in {record}. If you replaced the file "
                         f"on purpose, delete {record}; otherwise get the file again.")
    return path
