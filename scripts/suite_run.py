"""Running anakin for the task suite: one `anakin train` process per task and algorithm.

Each run is a subprocess of its own (`python -m anakin.cli train ...` with this interpreter), so a
crash or a timeout is recorded rather than fatal; its run directory's summary.json and
metrics.jsonl give the per-seed final evaluation returns and learning curves.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from scripts.suite_tasks import Task

SCRIPTS = Path(__file__).resolve().parent
REPO = SCRIPTS.parent
RUN_ENV = dict(os.environ)  # the environment every run starts with (before main changes ours)


def algorithm_of(column: str) -> str:
    """The algorithm of a suite column: ALGO, or ALGO@LABEL (the same algorithm with its own
    --train-args, e.g. ppo@accelerator next to ppo)."""
    return column.partition("@")[0]


def anakin_command(
    column: str, task: Task, budget: int, seeds: int, args, run_name: str
) -> list[str]:
    algo = algorithm_of(column)
    cmd = [sys.executable, "-m", "anakin.cli", "train", algo, "--env", task.env]
    if args.preset:
        cmd += ["--preset", args.preset]
    if task.kwargs:
        cmd += ["--env-kwargs", *[str(x) for kv in task.kwargs.items() for x in kv]]
    cmd += [
        "--num-seeds",
        str(seeds),
        "--arch.total-env-steps",
        str(budget),
        "--eval.episodes",
        str(args.eval_episodes),
        "--eval.max-steps",
        str(args.max_steps),
        "--out",
        str(args.runs),
        "--run-name",
        run_name,
        "--quiet",
        "--checkpoint.no-enabled",
    ]
    if getattr(args, "time_budget", None):
        cmd += ["--time-budget", str(args.time_budget)]
    return cmd + args.train_args.get(column, [])


def run_process(cmd: list[str], log: Path, timeout: float) -> tuple[int | None, float, str]:
    """Runs `cmd` with its output in `log`; (exit code or None on timeout, wall s, output tail)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(
            cmd, stdout=f, stderr=subprocess.STDOUT, env=RUN_ENV, start_new_session=True
        )
        try:
            code = proc.wait(timeout=timeout or None)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group: its own children too
            proc.wait()
            code = None
        except BaseException:  # Ctrl-C: the run has its own session, so end it here
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    wall = time.perf_counter() - t0
    tail = log.read_text(errors="replace")[-3000:]
    return code, wall, tail


def _thin(n: int, points: int) -> list[int]:
    """At most `points` evenly spread indices of range(n), always with the last one."""
    if n <= points:
        return list(range(n))
    return sorted({int(round(i)) for i in np.linspace(0, n - 1, points)})


def per_run(record: dict[str, Any], num_seeds: int) -> list[dict[str, Any]]:
    # With one seed anakin writes the run's numbers at the top level, without "per_run".
    return record["per_run"] if "per_run" in record else [record] * num_seeds


CURVE_KEYS = ("mean_return", "episodes", "entropy")  # entropy: IMPALA's policy entropy


def read_anakin_run(run_dir: Path, num_seeds: int, curve_points: int) -> dict[str, Any]:
    """Per-seed final evaluation returns and learning curves of one anakin run directory."""
    summary = json.loads((run_dir / "summary.json").read_text())
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x]
    keep = [records[i] for i in _thin(len(records), curve_points)]
    finals = per_run(summary, num_seeds)
    startup = summary.get("startup_time") or 0.0  # process start to compiled
    seeds = []
    for i, final in enumerate(finals):
        runs = [per_run(r, num_seeds)[i] for r in keep]
        curve = {
            "env_steps": [r["env_steps"] for r in keep],
            "wall_time": [round(r["wall_time"], 3) for r in keep],
            # since compiling ended: program calls (and evaluations during training, if any)
            "train_time": [round(r["wall_time"] - startup, 3) for r in keep],
        }
        for key in CURVE_KEYS:
            if any(key in r for r in runs):
                curve[key] = [r.get(key) for r in runs]
        if len(keep) < len(records):
            # every call, for the time to threshold (a thinned curve would round it up to the
            # next kept point): steps, training time and training return only
            every = [per_run(r, num_seeds)[i] for r in records]
            calls = {
                "env_steps": [r["env_steps"] for r in records],
                "train_time": [round(r["wall_time"] - startup, 3) for r in records],
                "mean_return": [r.get("mean_return") for r in every],
            }
        else:
            calls = None
        seed = {
            "seed": final.get("seed", i),
            "final_return": final.get("eval_mean_return"),
            "eval_episodes": final.get("eval_episodes"),
            "eval_unfinished": final.get("eval_unfinished"),
            "final_training_return": final.get("mean_return"),
            "curve": curve,
            **({"calls": calls} if calls else {}),
        }
        # IMPALA's policy entropy over every call (the curve may be thinned): a collapse shows
        # as a minimum near 0.
        entropy = [per_run(r, num_seeds)[i].get("entropy") for r in records]
        entropy = [e for e in entropy if e is not None]
        if entropy:
            seed["entropy_min"], seed["entropy_final"] = min(entropy), entropy[-1]
        seeds.append(seed)
    return {
        "env_steps": summary["env_steps"],
        "compile_time_s": summary.get("compile_time"),
        "startup_time_s": summary.get("startup_time"),
        "train_time_s": summary.get("train_time"),
        "time_budget": summary.get("time_budget"),
        "eval_time_s": summary.get("eval_time"),
        "program_wall_time_s": summary.get("wall_time"),
        "sps_per_seed": summary.get("sps"),
        "seeds": seeds,
    }


def reusable(run_dir: Path, task: Task, budget: int, num_seeds: int, cmd: list[str]) -> bool:
    """A finished run of this task, budget and seed count, whose algorithm and arch configs are
    those `cmd` would train with today (a changed default makes an old run stale)."""
    try:
        cfg = json.loads((run_dir / "config.json").read_text())["config"]
    except (OSError, ValueError, KeyError):
        return False
    from anakin import config as config_lib
    from anakin import launch

    env = cfg["env"]  # {"name", "kwargs", "hide"}
    algo, argv = cmd[4], cmd[5:]  # [python, -m, anakin.cli, train, ALGO, ...]
    now = config_lib.to_dict(launch.config_for_flags(algo, argv))
    return (
        (run_dir / "summary.json").is_file()
        and env["name"] == task.env
        and {k: float(v) for k, v in env["kwargs"].items()}
        == {k: float(v) for k, v in task.kwargs.items()}
        and cfg["arch"]["total_env_steps"] == budget
        and cfg["num_seeds"] == num_seeds
        and cfg.get("algo") == now["algo"]
        and cfg.get("arch") == now["arch"]
        and cfg.get("time_budget") == now.get("time_budget")
    )


def run_anakin(column: str, task: Task, budget: int, seeds: int, args) -> dict[str, Any]:
    name = f"{column.replace('@', '-')}-{task.slug}"
    run_dir = Path(args.runs) / name
    cmd = anakin_command(column, task, budget, seeds, args, name)
    runs = _rel(Path(args.runs))  # as recorded: no folder of this machine outside the repo
    shown = [runs if i > 0 and cmd[i - 1] == "--out" else a for i, a in enumerate(cmd)]
    out: dict[str, Any] = {
        "algo": column,
        "task": task.spec,
        "budget": budget,
        "run_dir": f"{runs}/{name}",
        "command": shlex.join(["anakin", *shown[3:]]),
    }
    wall_file = Path(args.runs) / f"{name}.wall"
    if args.reuse and reusable(run_dir, task, budget, seeds, cmd):
        out.update(status="ok", reused=True, wall_time_s=read_wall(wall_file))
    else:
        if run_dir.exists():
            shutil.rmtree(run_dir)
        code, wall, tail = run_process(cmd, Path(args.runs) / f"{name}.log", args.run_timeout)
        out["wall_time_s"] = wall
        if code != 0:
            why = "timed out" if code is None else f"exit code {code}"
            return {**out, "status": "failed", "error": f"{why}: {last_error(tail)}"}
        wall_file.write_text(f"{wall}\n")  # for --reuse
        out["status"] = "ok"
    try:
        out.update(read_anakin_run(run_dir, seeds, args.curve_points))
    except (OSError, ValueError, KeyError, IndexError) as e:
        return {**out, "status": "failed", "error": f"could not read the run: {e!r}"}
    return out


def read_wall(path: Path) -> float | None:
    """The process wall time a reused run took when it ran (None if not recorded)."""
    try:
        return float(path.read_text())
    except (OSError, ValueError):
        return None


_ERROR_LINE = re.compile(r"^([\w.]*(Error|Exception|Exit|Interrupt)\b|.*\berror: )")


def last_error(tail: str) -> str:
    """The run's last exception or `error:` line (else its last line), for the record."""
    lines = [x.strip() for x in tail.splitlines() if x.strip()]
    for line in reversed(lines):
        if _ERROR_LINE.match(line):
            return line[-400:]
    return lines[-1][-400:] if lines else "no output"


def _rel(path: Path) -> str:
    """`path` relative to the repository, or "RUNS" for a folder outside it (a result file
    names no folder of the machine that measured it; --runs says where the runs were)."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return "RUNS"


def machine_info() -> dict[str, Any]:
    """This host; the devices the runs trained on are added from the first run's config.json."""
    import jax

    from anakin import _xla

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    info = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _xla.host_cpu(),
        "cpu_cores": cores,
        "python": platform.python_version(),
        "jax": jax.__version__,
    }
    info["summary"] = f"{cores}-core {info['machine']} CPU ({info['cpu']}), JAX {jax.__version__}"
    return info


def on_host(cpu: str | None) -> str:
    """A command's host CPU as its result file's header names it after the command and date
    (a merged file's commands may have run on different hosts); nothing where the command's
    record predates the field."""
    return f", on {cpu}" if cpu else ""


def host_note(meta: dict[str, Any]) -> str:
    """The header's note of the host CPU, where a result file recorded one (`meta["cpu"]`, the
    last command's: a merged file's older runs may have run on another host)."""
    return f", the last command's on {meta['cpu']}" if meta.get("cpu") else ""


def note_run_devices(machine: dict[str, Any], result: dict[str, Any], runs: Path) -> None:
    """Records the backend and devices of the first anakin run (e.g. 2 forced CPU devices);
    `runs` is the --runs folder the run is in."""
    if "run_backend" in machine or result["status"] != "ok" or "run_dir" not in result:
        return
    try:
        cfg = json.loads((runs / Path(result["run_dir"]).name / "config.json").read_text())
        backend, devices = cfg["platform"]["backend"], cfg["platform"]["devices"]
    except (OSError, ValueError, KeyError):
        return
    machine["run_backend"], machine["run_devices"] = backend, devices
    if backend != "cpu":
        machine["summary"] += f"; runs on {len(devices)} {backend} device(s)"
