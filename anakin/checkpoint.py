"""Checkpoints of the whole training state, written atomically and verified before loading.

A checkpoint is `RUN_DIR/checkpoints/<env_steps>/`: orbax writes the `RunnerState` (parameters,
optimiser and target states, replay, environment and actor states, keys, counters; every
device's slice) and a JSON item of host counters plus the resolved config. Orbax writes into a
temporary directory and renames it when complete; anakin then writes `anakin_manifest.json`
(every file's size and SHA-256), also atomically. A checkpoint without a manifest is partial,
one whose files do not match it is corrupted; either is refused with an error naming the file.
Old checkpoints are deleted only after a newer one has its manifest, so a crash at any moment
leaves the last good checkpoint in place; pinned ones (`checkpoints/pinned.json`, e.g. the one a
forced resume started from) are never deleted.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import jax

from anakin import files, logger

MANIFEST = "anakin_manifest.json"
PINNED = "pinned.json"  # {step: why}: checkpoints `keep` leaves alone


class CheckpointError(RuntimeError):
    """A checkpoint is missing, partial or corrupted (the message names the file)."""


def _orbax():
    # Imported lazily: orbax is only needed by runs that checkpoint.
    import orbax.checkpoint as ocp

    return ocp


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files(step_dir: Path) -> list[Path]:
    return sorted(p for p in step_dir.rglob("*") if p.is_file() and p.name != MANIFEST)


def write_manifest(step_dir: Path) -> None:
    files = {
        str(p.relative_to(step_dir)): {"size": p.stat().st_size, "sha256": _digest(p)}
        for p in _files(step_dir)
    }
    logger.write_json(step_dir / MANIFEST, {"format": "anakin-checkpoint", "files": files})


def steps_in(checkpoints_dir: Path) -> list[int]:
    """Steps of the checkpoints in `checkpoints_dir`, complete or not, oldest first."""
    if not checkpoints_dir.is_dir():
        return []
    return sorted(int(p.name) for p in checkpoints_dir.iterdir() if p.name.isdigit())


def verify(step_dir: Path) -> None:
    """Raises CheckpointError naming the first file that is missing, truncated or altered."""
    if not step_dir.is_dir():
        saved = steps_in(step_dir.parent)
        have = f"; saved steps: {', '.join(map(str, saved))}" if saved else "; none is saved"
        raise CheckpointError(f"checkpoint {step_dir} does not exist{have}")
    manifest = step_dir / MANIFEST
    if not manifest.is_file():
        raise CheckpointError(
            f"checkpoint {step_dir} is partial: {manifest.name} is missing (the run stopped "
            "while writing it); use an earlier checkpoint"
        )
    try:
        files = json.loads(manifest.read_text())["files"]
    except (ValueError, KeyError) as e:
        raise CheckpointError(f"checkpoint manifest {manifest} is corrupted ({e})") from None
    for rel, want in files.items():
        path = step_dir / rel
        if not path.is_file():
            raise CheckpointError(f"checkpoint file {path} is missing")
        size = path.stat().st_size
        if size != want["size"]:
            raise CheckpointError(
                f"checkpoint file {path} is corrupted: {size} bytes, expected {want['size']}"
            )
        if _digest(path) != want["sha256"]:
            raise CheckpointError(f"checkpoint file {path} is corrupted: its SHA-256 differs")


def _first_line(e: BaseException) -> str:
    """The gist of an exception from orbax/tensorstore (which nest pages of detail): the
    operating system's reason where one is named, else the first line, at most 200 chars."""
    text = str(e).strip() or type(e).__name__
    for reason in ("No space left on device", "Permission denied", "Read-only file system"):
        if reason in text:
            return reason
    return text.splitlines()[0][:200]


# Set by the `anakin` command: after a failed write the process only ends, so stderr stays
# quiet until it does. Through the API (a notebook) stderr is given back at once instead, and
# orbax's dying threads may still print there.
QUIET_UNTIL_EXIT_AFTER_A_FAILURE = False


class _QuietFailure:
    """While a checkpoint is written: orbax's worker threads report a failed write with pages
    of tracebacks and absl/asyncio errors of their own, before and after the save raises. Those
    are held back from stderr. After a failure in the `anakin` command they stay held back (the
    run is ending with one line that says why, and stderr passes only anakin's lines); after a
    success, or a failure through the API, everything is as before."""

    def __enter__(self) -> None:
        import logging
        import threading

        self._loggers = [logging.getLogger(n) for n in ("absl", "asyncio")]
        self._levels = [lg.level for lg in self._loggers]
        self._hook, self._stderr = threading.excepthook, sys.stderr
        for lg in self._loggers:
            lg.setLevel(logging.CRITICAL)
        threading.excepthook = lambda args: None
        sys.stderr = _DropTracebacks(sys.stderr)

    def __exit__(self, kind, value, tb) -> None:
        import threading

        if kind is None or not QUIET_UNTIL_EXIT_AFTER_A_FAILURE:
            for lg, level in zip(self._loggers, self._levels, strict=True):
                lg.setLevel(level)
            threading.excepthook, sys.stderr = self._hook, self._stderr


class _DropTracebacks:
    """stderr that passes only anakin's own lines (they start with "anakin" or "[anakin]"),
    while a checkpoint is written and, after a failed write, until the process ends: orbax's
    dying threads print tracebacks in pieces, warnings about coroutines never awaited at exit,
    and write them between the pieces of other writes, so nothing else is let through."""

    def __init__(self, stream: Any):
        self._stream, self._ours = stream, False

    def write(self, text: str) -> int:
        if text.startswith(("anakin", "[anakin]")):
            self._ours = not text.endswith("\n")  # the rest of the line may follow
            return self._stream.write(text)
        if self._ours and text == "\n":  # print()'s end, written apart from its text
            self._ours = False
            return self._stream.write(text)
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Checkpointer:
    """Saves and restores `RunnerState`s under `run_dir/checkpoints`, keeping the last `keep`."""

    def __init__(self, run_dir: str | Path, keep: int = 3):
        ocp = _orbax()
        self.dir = Path(run_dir).absolute() / "checkpoints"
        self.keep = keep
        self._manager = ocp.CheckpointManager(
            self.dir,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=None,  # we delete old ones ourselves, after the manifest is written
                enable_async_checkpointing=False,
                create=True,
            ),
            item_names=("state", "meta"),
        )

    def steps(self) -> list[int]:
        """Steps of the checkpoints on disk, complete or not, oldest first."""
        return steps_in(self.dir)

    def good_steps(self) -> list[int]:
        out = []
        for step in self.steps():
            try:
                verify(self.dir / str(step))
                out.append(step)
            except CheckpointError:
                pass
        return out

    def save(self, step: int, state: Any, meta: dict[str, Any]) -> Path:
        """Writes the checkpoint for `step`; returns its directory once it is complete."""
        ocp = _orbax()
        self._manager.reload()  # forget steps deleted behind orbax's back
        if step in self._manager.all_steps():  # a leftover of an interrupted earlier attempt
            self._manager.delete(step)
        quiet = _QuietFailure()
        try:
            with quiet:
                self._manager.save(
                    step,
                    args=ocp.args.Composite(
                        state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)
                    ),
                    force=True,
                )
                self._manager.wait_until_finished()
                step_dir = self.dir / str(step)
                if jax.process_index() == 0:
                    write_manifest(step_dir)
        except Exception as e:  # a full disk, a vanished directory, ...
            good = self.good_steps()
            kept = f"the newest good one is step {good[-1]}" if good else "no good one exists"
            raise CheckpointError(
                f"writing checkpoint {step} in {self.dir} failed ({_first_line(e)}); {kept}"
            ) from None
        if jax.process_index() == 0:
            pinned = set(self.pinned())
            for old in self.good_steps()[: -self.keep]:
                if old not in pinned:
                    shutil.rmtree(self.dir / str(old), ignore_errors=True)
        return step_dir

    def pinned(self) -> dict[int, str]:
        """Checkpoints that `keep` never deletes, with why (see `pin`)."""
        path = self.dir / PINNED
        if not path.exists():
            return {}
        try:
            return {int(k): str(v) for k, v in json.loads(path.read_text()).items()}
        except (ValueError, AttributeError) as e:
            raise CheckpointError(
                f"{path} is corrupted ({str(e).splitlines()[0][:120]}); it lists the checkpoints "
                'kept whatever checkpoint.keep says: repair it as JSON {"STEP": "why"} '
                "or delete it"
            ) from None

    def pin(self, step: int, why: str) -> None:
        """Keeps checkpoint `step` whatever `keep` says, e.g. the last one before a forced
        resume changed the run's settings, so a change that turns out badly (a diverging
        learning rate) cannot push the last good state out of the directory."""
        if jax.process_index() != 0:
            return
        pinned = {**self.pinned(), step: why}
        files.write_atomic(
            self.dir / PINNED, json.dumps({str(k): v for k, v in sorted(pinned.items())}, indent=1)
        )

    def latest_step(self) -> int:
        """The newest good checkpoint.

        A newest checkpoint that is only partial (no manifest: the run was killed while writing
        it) is passed over for the one before; one whose files do not match its manifest is
        corruption and raises. CheckpointError also when no good checkpoint exists.
        """
        steps = self.steps()
        if not steps:
            raise CheckpointError(f"no checkpoint in {self.dir}")
        for step in reversed(steps):
            step_dir = self.dir / str(step)
            if not (step_dir / MANIFEST).is_file():
                continue  # partial: interrupted while being written
            try:
                verify(step_dir)
            except CheckpointError as e:
                older = [s for s in self.good_steps() if s < step]
                hint = (
                    f"; the newest good one is step {older[-1]} (train --resume-step "
                    f"{older[-1]}; evaluate, collect and render --step {older[-1]})"
                    if older
                    else "; no good checkpoint is left"
                )
                raise CheckpointError(f"{e}{hint}") from None
            return step
        raise CheckpointError(
            f"no complete checkpoint in {self.dir}: {', '.join(map(str, steps))} are partial "
            f"(no {MANIFEST})"
        )

    def restore(self, step: int, like: Any) -> tuple[Any, dict[str, Any]]:
        """The state and meta of `step`, placed like `like` (a state of the same shapes, or
        ShapeDtypeStructs with shardings, e.g. `loop.state_shapes` on one device)."""
        ocp = _orbax()
        step_dir = self.dir / str(step)
        verify(step_dir)
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        try:
            self._manager.reload()
            restored = self._manager.restore(
                step,
                args=ocp.args.Composite(
                    state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()
                ),
            )
        except Exception as e:  # orbax/tensorstore raise many kinds; name the checkpoint
            first = str(e).splitlines()[0][:300]
            hint = (
                "; it holds a state of another shape: written by another version of anakin, "
                "or with settings that change what the learner keeps (its network or optimiser)"
                if "structure" in str(e)
                else ""
            )
            raise CheckpointError(
                f"checkpoint {step_dir} could not be restored into this run's state "
                f"({type(e).__name__}: {first}){hint}"
            ) from None
        return restored.state, dict(restored.meta)

    def close(self) -> None:
        self._manager.close()


__all__ = ["CheckpointError", "Checkpointer", "verify", "write_manifest"]
