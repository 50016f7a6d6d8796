"""Files written whole or not at all, so that a crash never leaves half of one behind."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable
from typing import IO, Any

import numpy as np


def write_atomic(path: str | os.PathLike, data: bytes | str | Callable[[IO[bytes]], None]) -> None:
    """Writes `path` atomically: the complete new file, or the old one (if any) untouched.

    Args:
      path: the file to write; its directory must exist.
      data: the file's bytes, its text (written as UTF-8), or a function that writes the bytes
        into the binary file it is given.

    The bytes go to a temporary file in the same directory, created with the mode `open` would
    give it (the umask's), flushed to disk and renamed over `path`; the directory is then
    flushed too, where the system allows, so that the rename itself survives a power cut.

    Raises:
      OSError: the file cannot be written; the temporary file is removed.
    """
    name = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(name))
    tmp = os.path.join(directory, f".{os.path.basename(name)}.{uuid.uuid4().hex[:8]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def jsonable(x: Any) -> Any:
    """A JSON value for what `json` cannot write itself: numpy scalars and arrays as numbers and
    lists, anything else as its `str`."""
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Writes `obj` as indented JSON, atomically (`write_atomic`); numpy values as numbers."""
    write_atomic(path, json.dumps(obj, indent=2, default=jsonable))
