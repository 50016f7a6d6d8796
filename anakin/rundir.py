"""Run directories: their names, what they record of a run, and the checks of a resume."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from anakin import algorithms, files
from anakin.config import (
    SettingTypeError,
    TrainConfig,
    differences,
    is_resumable,
    train_config_from_dict,
)


class Resume(NamedTuple):
    """Continue the run in `run_dir` from checkpoint `step` (None: the newest)."""

    run_dir: Path
    step: int | None = None


class NothingToResume(ValueError):
    """The run to resume already reached the requested arch.total_env_steps."""


def check_resume(
    saved: TrainConfig, cfg: TrainConfig, force: bool = False, saved_devices: int | None = None
) -> None:
    """Refuses (ValueError listing each field) a resume whose config differs from the saved one
    in anything not declared `resumable` in `anakin.config`, unless `force`. `arch.num_devices`
    0 ("every device") and the run's own device count `saved_devices` are the same layout."""
    same_layout = {0, saved_devices}
    diffs = [
        (name, a, b)
        for name, a, b in differences(saved, cfg)
        if not is_resumable(TrainConfig, name)
        and not (name == "arch.num_devices" and {a, b} <= same_layout)
    ]
    if diffs and not force:
        changes = "; ".join(f"{name}: saved {a!r}, now {b!r}" for name, a, b in diffs)
        raise ValueError(
            f"the config differs from the one the run was saved with ({changes}): "
            "resume with the saved values (drop those flags), or pass --force to resume anyway "
            "(the result will no longer match an uninterrupted run)"
        )


def load_saved_config(run_dir: Path, algo_name: str) -> TrainConfig:
    """The config a run directory was trained with (ValueError if unreadable or another algo)."""
    saved = read_description(run_dir)
    if saved.get("algorithm") != algo_name:
        raise ValueError(
            f"{run_dir} was trained with {saved.get('algorithm')!r}, not {algo_name!r}"
        )
    try:
        return train_config_from_dict(saved["config"], algorithms.get(algo_name).config_cls)
    except ValueError as e:  # a hand edit of the wrong type or range: say where it is
        kind = SettingTypeError if isinstance(e, SettingTypeError) else ValueError
        raise kind(f"{Path(run_dir) / 'config.json'}: {e}") from None


def recorded_config(run_dir: Path, step: int | None, algo_name: str) -> TrainConfig | None:
    """The config that checkpoint `step` (None: the newest complete one) was saved with, from
    its own record (`meta`), or None where it cannot be read (the restore then says why). A
    config.json edited by hand after the checkpoint differs from it."""
    from anakin.checkpoint import MANIFEST

    ckpts = Path(run_dir) / "checkpoints"
    try:
        if step is None:
            done = [int(p.name) for p in ckpts.iterdir() if p.name.isdigit()]
            done = [d for d in done if (ckpts / str(d) / MANIFEST).is_file()]
            step = max(done) if done else None
        if step is None:
            return None
        meta = json.loads((ckpts / str(step) / "meta" / "metadata").read_text())
        return train_config_from_dict(meta["config"], algorithms.get(algo_name).config_cls)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def agree(text: str) -> str:
    """Process 0's `text` on every process (run directory names must match across hosts)."""
    if jax.process_count() == 1:
        return text
    from jax.experimental import multihost_utils

    data = np.zeros(1024, np.uint8)
    raw = text.encode()[:1024]
    data[: len(raw)] = np.frombuffer(raw, np.uint8)
    data = np.asarray(multihost_utils.broadcast_one_to_all(data))
    return bytes(data[data > 0]).decode()


def read_description(run_dir: Path) -> dict[str, Any]:
    """A run directory's config.json; ValueError naming the path when it is not one."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise ValueError(f"{run_dir} does not exist; pass a run directory written by anakin train")
    if not run_dir.is_dir():
        raise ValueError(
            f"{run_dir} is a file, not a run directory (one written by anakin train, holding "
            "config.json and checkpoints/)"
        )
    path = run_dir / "config.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist: is {run_dir} an anakin run directory?") from None
    except ValueError as e:
        raise ValueError(f"{path} is not valid JSON ({e})") from None


def check_same_dataset(run_dir: Path, prepared: Any, force: bool = False) -> None:
    """An offline run must read the same dataset bytes it trained on (not a file that replaced
    them), unless `force` (the change is then recorded in config-history.jsonl, see
    `write_description`)."""
    description = read_description(run_dir)
    trained_on = description.get("dataset")
    if trained_on and prepared.dataset_meta is not None and not force:
        now = prepared.dataset_meta["sha256"]
        if trained_on["sha256"] != now:
            raise ValueError(
                f"{prepared.cfg.dataset} is not the dataset {run_dir} trained on: its SHA-256 is "
                f"{now[:16]}..., the run's was {trained_on['sha256'][:16]}... (the file changed "
                "or was replaced); resume with the original file, or pass --force to train on "
                "the new one (recorded in config-history.jsonl)"
            )


def check_device_count(run_dir: Path, num_devices: int) -> None:
    """A resumed run must lay its state over as many devices as the saved one (checked before
    the config is fitted to the devices, so the refusal names the devices, not a count)."""
    saved = read_description(run_dir)["derived"]["num_devices"]
    if saved != num_devices:
        fix = (
            f"add --arch.num-devices {saved} to use {saved} of them"
            if num_devices > saved
            else f"resume where {saved} devices exist"
        )
        raise ValueError(
            f"{run_dir} was trained on {saved} devices but this run has {num_devices}; {fix}"
        )


HISTORY = "config-history.jsonl"


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    """{"algo.learning_rate": 0.001, ...}: the leaves of a JSON config by dotted name."""
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree}
    out: dict[str, Any] = {}
    for k, v in tree.items():
        out |= _flat(v, f"{prefix}.{k}" if prefix else k)
    return out


def write_description(
    run_dir: Path,
    description: dict[str, Any],
    resumed_from: int | None = None,
    trained_config: dict[str, Any] | None = None,
) -> list[str]:
    """Writes `description` as the run's config.json, never losing the one it replaces.

    On a resume whose config differs from the saved one (run-control fields such as
    `arch.total_env_steps`, or anything with `--force`), the saved description is first
    appended to `config-history.jsonl` with the env step from which it stopped applying and
    the fields that changed, so every setting the run ever trained with stays on record.

    `trained_config`: the config the resumed checkpoint was saved with (its own record); the
    changes are counted from it, so a hand edit of config.json is recorded like a flag.

    Returns:
      The changed fields that a resume keeps unless forced (empty for a plain resume).
    """
    path = Path(run_dir) / "config.json"
    if resumed_from is None or not path.exists():
        files.write_json(path, description)
        return []
    old = read_description(run_dir)
    if trained_config is not None:
        old = {**old, "config": trained_config}
    new = json.loads(json.dumps(description, default=str))
    # The config, and for offline runs the dataset's bytes ("dataset_file.sha256").
    before = _flat(old.get("config", {})) | _flat(old.get("dataset") or {}, "dataset_file")
    after = _flat(new["config"]) | _flat(new.get("dataset") or {}, "dataset_file")
    before.pop("dataset_file", None), after.pop("dataset_file", None)  # no dataset: {}
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        entry = {
            "until_env_step": resumed_from,
            "changed": {k: [before.get(k), after.get(k)] for k in changed},
            "description": old,
        }
        with open(Path(run_dir) / HISTORY, "a") as f:
            f.write(json.dumps(entry, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
    files.write_json(path, description)
    return [k for k in changed if not is_resumable(TrainConfig, k)]


class RunLock:
    """Held by the process that trains in a run directory: a second `anakin train --resume`
    of the same directory stops with one line instead of both writing checkpoints and metrics.
    An advisory `flock` on `RUN_DIR/.lock`, released when training ends or the process dies."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / ".lock"
        self._file = None

    def __enter__(self) -> RunLock:
        import fcntl

        f = open(self.path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            f.close()
            raise ValueError(
                f"{self.path.parent} is in use: {holder} is training in it; wait for it to "
                "finish (or stop it), then resume"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"process {os.getpid()}")
        f.flush()
        self._file = f
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._file is not None:
            self._file.close()  # closing releases the lock
            self._file = None
