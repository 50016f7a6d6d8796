"""Atomic writes: a complete file or the old one, with the umask's mode, no temporary left."""

import json
import os
import stat

import numpy as np
import pytest

from anakin import files


def test_bytes_text_and_writer_functions(tmp_path):
    path = tmp_path / "a.bin"
    files.write_atomic(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    files.write_atomic(path, "é\n")  # replaces, as UTF-8
    assert path.read_bytes() == "é\n".encode()
    files.write_atomic(path, lambda f: np.save(f, np.arange(3)))
    np.testing.assert_array_equal(np.load(path), np.arange(3))
    assert os.listdir(tmp_path) == ["a.bin"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_a_failed_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "a.json"
    files.write_json(path, {"step": np.int64(3), "x": np.zeros(2, np.float32)})
    assert json.loads(path.read_text()) == {"step": 3, "x": [0.0, 0.0]}

    def half(f):
        f.write(b"{")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        files.write_atomic(path, half)
    assert json.loads(path.read_text())["step"] == 3
    assert os.listdir(tmp_path) == ["a.json"]
    with pytest.raises(FileNotFoundError):
        files.write_atomic(tmp_path / "no" / "a.json", b"")
