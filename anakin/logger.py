"""Run directories, metrics files and the live progress line. Host-side only."""

from __future__ import annotations

import datetime
import json
import math
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from anakin.files import jsonable as _jsonable
from anakin.files import write_atomic
from anakin.files import write_json as write_json  # logger.write_json stays importable


def check_out_dir(out: str) -> None:
    """ValueError unless run directories can be made under `out` (before anything is built):
    it, or the nearest part of it that exists, is a writable directory."""
    path = Path(out).absolute()
    while not path.exists():
        path = path.parent
    if not path.is_dir():
        raise ValueError(f"--out {out}: {path} is a file, not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: cannot create directories in {path} (permission denied)")


def check_run_name(name: str) -> None:
    """ValueError unless `name` is one directory name (the run directory is made inside
    --out, never elsewhere): no path separator, not "." or ".."."""
    if name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise ValueError(
            f"--run-name {name!r} must be one directory name (no '/', not '.' or '..'): the "
            "run directory is made inside --out; choose the parent directory with --out"
        )


def make_run_dir(out: str, name: str) -> Path:
    """A fresh directory `out/name`; `-1`, `-2`, ... are appended rather than reusing one."""
    check_out_dir(out)
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    path, i = root / name, 0
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            i += 1
            path = root / f"{name}-{i}"


def default_run_name(algo: str, env: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    # Suite prefixes and import paths: pgx/2048 -> pgx_2048, pkg.mod:make -> pkg.mod_make.
    return f"{algo}-{env.replace('/', '_').replace(':', '_')}-{stamp}"


def to_record(metrics: dict[str, Any]) -> dict[str, Any]:
    """Host scalars from a metrics dict; non-finite floats become None (valid JSON)."""
    out = {}
    for k, v in metrics.items():
        v = np.asarray(v)
        v = v.item() if v.size == 1 else v.tolist()
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out


class MetricsWriter:
    """Appends one JSON line per record to `metrics.jsonl`, flushed at once."""

    def __init__(self, path: Path):
        self.path = path
        self._f = open(path, "a")

    def write(self, record: dict[str, Any]) -> None:
        self._f.write(json.dumps(record, default=_jsonable) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def truncate_metrics(run_dir: str | Path, max_env_steps: int) -> None:
    """Drops records past `max_env_steps` (a resumed run redoes those calls), atomically."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return
    keep = [r for r in read_metrics(run_dir) if r["env_steps"] <= max_env_steps]
    write_atomic(path, "".join(json.dumps(r, default=_jsonable) + "\n" for r in keep))


def require_tensorboard() -> Any:
    """tensorboardX's SummaryWriter, or ValueError with the install command."""
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        raise ValueError(
            'tensorboard=True needs tensorboardX: pip install -e ".[tensorboard]"'
        ) from None
    return SummaryWriter


class TensorBoardWriter:
    """Scalars of each record as TensorBoard events (step = env steps), via tensorboardX: the
    ones W&B logs (`wandb_values`), each run's as `run<i>/<key>`."""

    def __init__(self, path: Path):
        self._w = require_tensorboard()(str(path))

    def write(self, record: dict[str, Any]) -> None:
        for k, v in wandb_values(record).items():  # the same scalars as W&B's
            self._w.add_scalar(k, v, record["env_steps"])
        self._w.flush()

    def close(self) -> None:
        self._w.close()


class SinkError(RuntimeError):
    """A metrics sink (W&B) could not start; the message says why and what to do."""


class WandbWriter:
    """The same records as metrics.jsonl, as one Weights & Biases run per run directory.

    Each record is logged at W&B step = its env steps (the x-axis of every chart); numbers
    only. A multi-run program's `per_run` rows become `run<i>/<key>` (`run0/mean_return`, ...)
    beside the means over runs, and each run's seed and swept values go into the W&B config
    (`derived.runs`, as in config.json). The W&B run id is kept in `wandb_id.txt`, so that a
    resumed run continues the same W&B run (`resume="must"`). Records that a resume redoes
    (those past its checkpoint, if the run had logged them before it stopped) are skipped
    where W&B says how far the run got (online); W&B keeps one row per step in any case.

    Args:
      run_dir: the run directory (W&B's local files go to `run_dir/wandb` unless WANDB_DIR
        is set).
      config: the resolved config, as written to config.json.
      project, entity, group, tags, name, mode: W&B's own (see `anakin.config.WandbConfig`).
    """

    def __init__(
        self,
        run_dir: Path,
        config: dict[str, Any],
        *,
        project: str,
        entity: str = "",
        group: str = "",
        tags: tuple[str, ...] = (),
        name: str = "",
        mode: str = "",
        quiet: bool = False,
    ):
        wandb = require_wandb()
        id_file = Path(run_dir) / WANDB_ID_FILE
        resuming = id_file.exists()
        run_id = id_file.read_text().strip() if resuming else uuid.uuid4().hex[:12]
        self._wandb = wandb
        try:
            self._run = wandb.init(
                project=project,
                entity=entity or None,
                group=group or None,
                tags=list(tags) or None,
                name=name or Path(run_dir).name,
                mode=mode or None,
                id=run_id,
                resume="must" if resuming else None,
                dir=None if os.environ.get("WANDB_DIR") else str(run_dir),
                config=config,
                settings=wandb.Settings(silent=quiet),
            )
        except wandb.errors.Error as e:  # not logged in, no network, a bad entity, ...
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise SinkError(
                f"W&B could not start: {first} (or pass --wandb.mode offline and "
                "`wandb sync` the run later)"
            ) from None
        if resuming:  # a resume may change what it reports (eval, checkpoints, ...)
            self._run.config.update(config, allow_val_change=True)
        else:
            id_file.write_text(run_id + "\n")
        self._next_step = self._run.step  # W&B's next step: 0 when new or offline

    @property
    def run_id(self) -> str:
        return self._run.id

    def write(self, record: dict[str, Any]) -> None:
        step = record["env_steps"]
        if step < self._next_step:  # already logged before the resume's checkpoint
            return
        self._run.log(wandb_values(record), step=step)

    def video(self, env_steps: int, path: Path) -> None:
        """A video file, logged as `video` at step `env_steps` (with that step's record)."""
        if env_steps >= self._next_step:
            self._run.log({"video": self._wandb.Video(str(path))}, step=env_steps)

    def close(self, exit_code: int = 0) -> None:
        self._run.finish(exit_code=exit_code)


WANDB_ID_FILE = "wandb_id.txt"


def require_wandb() -> Any:
    """The `wandb` module, or ValueError with the install command."""
    try:
        import wandb
    except ImportError:
        raise ValueError(
            'wandb.enabled needs the wandb package: pip install -e ".[wandb]"'
        ) from None
    return wandb


def wandb_values(record: dict[str, Any]) -> dict[str, float | int]:
    """The numbers of a record as W&B logs them: top-level numbers (not env_steps, the step),
    and each run's numbers as `run<i>/<key>` (not its seed, nor its swept values, which are
    config, except in a PBT population, whose values change as it trains)."""

    def numbers(d: dict[str, Any]) -> dict[str, float | int]:
        return {
            k: v
            for k, v in d.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v is not None
        }

    out = {k: v for k, v in numbers(record).items() if k != "env_steps"}
    population = "pbt_steps" in record
    for i, row in enumerate(record.get("per_run", [])):
        for k, v in numbers(row).items():
            if k != "seed" and (population or not k.startswith("algo.")):
                out[f"run{i}/{k}"] = v
    return out


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """metrics.jsonl's records. A last line cut short (the process was killed while writing
    it) is dropped, since a resume redoes that call; a bad line elsewhere is a ValueError
    naming the file and the line."""
    path = Path(run_dir) / "metrics.jsonl"
    lines = [(i, line) for i, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]
    records = []
    for j, (i, line) in enumerate(lines):
        try:
            records.append(json.loads(line))
        except ValueError:
            if j == len(lines) - 1:
                print(
                    f"[anakin] warning: {path}: dropped its last line, cut short (the process "
                    "was stopped while writing it); a resume redoes that call",
                    file=sys.stderr,
                )
                break
            raise ValueError(f"{path}: line {i} is not a JSON record: {line[:60]!r}") from None
    return records


def _fmt_steps(n: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}"
    return f"{n:.0f}"


def format_duration(seconds: float) -> str:
    """ "0:42", "12:05", "3:07:09": minutes and seconds, with hours when there are any."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def describe(record: dict[str, Any], unit: str = "steps", eta_s: float | None = None) -> str:
    """One human line: throughput, mean return of completed episodes, loss, evaluation, and the
    time left (`eta_s`, seconds) when it is known."""
    parts = [f"{_fmt_steps(record.get('sps') or 0)} {unit}/s"]
    ret = record.get("mean_return")
    if ret is not None:
        parts.append(f"return {ret:.1f} ({record['episodes']} eps)")
    elif unit == "steps":
        parts.append("return - (no episode ended)")
    if record.get("loss") is not None:
        parts.append(f"loss {record['loss']:.4g}")
    if record.get("eval_mean_return") is not None:
        parts.append(f"eval {record['eval_mean_return']:.1f}")
    if eta_s is not None:
        parts.append(f"ETA {format_duration(eta_s)}")
    return " | ".join(parts)


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (a notebook, JupyterLab, VS Code, Colab): its
    IPython shell runs inside an IPKernelApp. IPython is never imported here: a kernel has
    always imported it already, and anywhere else its absence answers the question."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and "IPKernelApp" in shell.config


class Progress:
    """Training progress: env steps, throughput, return and the time left.

    On a terminal, a rich bar fitted to the terminal's width (80 columns hold all of it); in a
    Jupyter notebook, a live bar updated in place (IPython's display handle, no ipywidgets
    needed) that stays as a clean final line; elsewhere (CI, logs) one plain line every
    `every_s` seconds and on the last update. Messages (`message`) print above a terminal's
    bar, and as plain lines otherwise. `console` (a rich Console) draws the terminal bar there
    instead of on stdout.

    The time left is the remaining steps at the average rate since the first update (which
    comes after compiling and the first call), so pauses for evaluation and checkpoints count;
    before a second update it is the last call's rate.
    """

    def __init__(
        self,
        total_steps: int,
        title: str,
        quiet: bool = False,
        every_s: float = 5.0,
        unit: str = "steps",
        console: Any = None,
    ):
        self.total, self.quiet, self.every_s, self.unit = total_steps, quiet, every_s, unit
        self.title = title
        self._start = time.monotonic()
        self._last_print = -math.inf
        self._first: tuple[float, int] | None = None  # (time, steps) of the first update
        self._bar = self._notebook = None
        if quiet:
            return
        if console is None and in_notebook():
            self._notebook = _NotebookBar(title)
        elif console is not None or sys.stdout.isatty():
            from rich.text import Text

            self._bar = _rich_bar(console)
            self._bar.console.print(Text(title, style="bold"))
            self._task = self._bar.add_task(title, total=total_steps, **_bar_fields(0, self))
            self._bar.start()
        else:
            print(f"[anakin] {title}: compiling...", flush=True)

    def eta(self, record: dict[str, Any]) -> float | None:
        """Seconds left at the rate so far (see the class docstring); None before any rate."""
        steps, now = record["env_steps"], time.monotonic()
        if self._first is None:
            self._first = (now, steps)
        t0, s0 = self._first
        rate = (steps - s0) / (now - t0) if steps > s0 and now > t0 else record.get("sps")
        if not rate:
            return None
        return max(self.total - steps, 0) / rate

    def update(self, record: dict[str, Any], final: bool = False) -> None:
        if self.quiet:
            return
        steps = record["env_steps"]
        eta = None if final else self.eta(record)
        if self._bar is not None:
            fields = _bar_fields(steps, self, record, eta)
            self._bar.update(self._task, completed=min(steps, self.total), **fields)
            return
        if self._notebook is not None:
            self._notebook.update(
                min(steps, self.total) / max(self.total, 1), self._line(record, eta)
            )
            return
        now = time.monotonic()
        if final or now - self._last_print >= self.every_s:
            self._last_print = now
            print(f"[anakin] {self._line(record, eta)}", flush=True)

    def _line(self, record: dict[str, Any], eta: float | None) -> str:
        what = "env steps" if self.unit == "steps" else self.unit
        steps = record["env_steps"]
        return f"{steps:,}/{self.total:,} {what} | {describe(record, self.unit, eta)}"

    def message(self, text: str) -> None:
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.console.print(text, markup=False)  # brackets in a message stay as typed
        else:
            print(f"[anakin] {text}", flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _rich_bar(console: Any) -> Any:
    """rich's progress display with the columns of `_bar_fields`: the bar takes the width the
    numbers leave (at 80 columns about 20), so nothing is cut."""
    from rich.progress import BarColumn, TextColumn
    from rich.progress import Progress as RichProgress

    return RichProgress(
        BarColumn(bar_width=None),
        TextColumn("{task.percentage:>3.0f}%"),
        TextColumn("{task.fields[steps]}"),
        TextColumn("{task.fields[rate]}"),
        TextColumn("{task.fields[ret]}"),
        TextColumn("{task.fields[time]}"),
        console=console,
        expand=True,
    )


def _bar_fields(
    steps: int, progress: Progress, record: dict[str, Any] | None = None, eta: float | None = None
) -> dict[str, str]:
    """The bar's numbers: steps done of the total, throughput, mean return, time taken and
    left; "compiling..." before the first record."""
    unit = progress.unit
    fields = {"steps": f"{_fmt_steps(steps)}/{_fmt_steps(progress.total)} {unit}"}
    if record is None:
        return {**fields, "rate": "", "ret": "compiling...", "time": ""}
    ret = record.get("mean_return")
    elapsed = format_duration(time.monotonic() - progress._start)
    eta = 0.0 if steps >= progress.total else eta
    return {
        **fields,
        "rate": f"{_fmt_steps(record.get('sps') or 0)}/s",
        "ret": f"return {ret:.1f}" if ret is not None else ("return -" if unit == "steps" else ""),
        "time": f"{elapsed} ETA {format_duration(eta) if eta is not None else '-'}",
    }


class _NotebookBar:
    """A progress bar in a Jupyter notebook's output, redrawn in place through an IPython
    display handle (an HTML <progress> element and the plain line beside it)."""

    def __init__(self, title: str):
        from IPython.display import display

        self._title = title
        self._handle = display(self._html(0.0, "compiling..."), display_id=True)

    def _html(self, fraction: float, line: str) -> Any:
        from html import escape

        from IPython.display import HTML

        return HTML(
            f"<div><b>{escape(self._title)}</b><br><progress value='{fraction:.4f}' max='1' "
            f"style='width:30em'></progress> {100 * fraction:.0f}% "
            f"<code>{escape(line)}</code></div>"
        )

    def update(self, fraction: float, line: str) -> None:
        self._handle.update(self._html(fraction, line))
