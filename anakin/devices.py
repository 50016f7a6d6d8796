"""Device mapping, in one place: the axis name, `pmap`, collectives, moving trees on and off.

This is the only module that calls `jax.pmap`; moving anakin to `shard_map` changes this file.
Trees placed "per device" carry a leading axis of size `len(devices)`.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

AXIS = "device"


def initialize_distributed(
    coordinator: str | None = None, num_processes: int | None = None, process_id: int | None = None
) -> bool:
    """Joins a multi-process run (`jax.distributed`), before anything else touches JAX.

    Arguments left out come from JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID,
    then from JAX's own cluster detection (SLURM, Open MPI, TPU pods, ...). Returns False (and
    does nothing) when neither a coordinator nor a process count is given. On CPU, collectives
    between processes use gloo.
    """
    env = os.environ
    coordinator = coordinator or env.get("JAX_COORDINATOR_ADDRESS")
    if num_processes is None and env.get("JAX_NUM_PROCESSES"):
        num_processes = _env_int("JAX_NUM_PROCESSES")
    if process_id is None and env.get("JAX_PROCESS_ID"):
        process_id = _env_int("JAX_PROCESS_ID")
    if coordinator is None and num_processes is None:
        return False
    if coordinator is not None:
        host, colon, port = coordinator.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                f"--coordinator {coordinator!r} is not HOST:PORT (e.g. 10.0.0.1:1234, with a "
                "port in 1..65535)"
            )
    if num_processes is not None and num_processes < 1:
        raise ValueError(f"--num-processes {num_processes} must be >= 1")
    if num_processes is not None and process_id is not None:
        if not 0 <= process_id < num_processes:
            raise ValueError(
                f"--process-id {process_id} must lie in 0..{num_processes - 1} "
                f"(--num-processes {num_processes})"
            )
    timeout = _env_int("ANAKIN_DISTRIBUTED_TIMEOUT", 300)
    print(
        f"[anakin] process {process_id} of {num_processes}: joining the run at {coordinator} "
        f"(waiting up to {timeout}s for every process; ANAKIN_DISTRIBUTED_TIMEOUT changes it)",
        file=sys.stderr,
        flush=True,
    )
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    failed = (
        f"the multi-process run did not start within {timeout}s: not every one of the "
        f"{num_processes} processes joined the coordinator at {coordinator} (start each with "
        "the same --coordinator and --num-processes and its own --process-id)"
    )

    def give_up() -> None:
        # XLA's client aborts the whole process (a C++ check failure and a stack trace) when
        # its own deadline passes, which Python cannot catch: stop first, with one line.
        print(f"anakin: error: {failed}", file=sys.stderr, flush=True)
        os._exit(2)

    watchdog = threading.Timer(timeout, give_up)
    watchdog.daemon = True
    watchdog.start()
    try:
        jax.distributed.initialize(
            coordinator, num_processes, process_id, initialization_timeout=timeout + 60
        )
    except Exception as e:  # jax raises XlaRuntimeError/RuntimeError with a page of detail
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise ValueError(f"{failed}; JAX said: {first}") from None
    finally:
        watchdog.cancel()
    return True


def _env_int(name: str, default: int | None = None) -> int | None:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} must be an integer") from None


def platform() -> str:
    """The default backend's platform: "cpu", "gpu" or "tpu" (what `arch.layout` "auto" reads)."""
    return jax.default_backend()


def select(num_devices: int = 0) -> list[jax.Device]:
    """The first `num_devices` devices of the default backend (0 = all of them).

    With several processes these are global devices; each process drives its own.
    """
    available = jax.devices()
    if num_devices < 0 or num_devices > len(available):
        raise ValueError(
            f"num_devices={num_devices}, but this machine has {len(available)} "
            f"{available[0].platform} device(s); use 0 (all) or 1..{len(available)}"
        )
    return list(available[: num_devices or len(available)])


def describe(devices: Sequence[jax.Device]) -> str:
    """What the run trains on, e.g. "2 cpu devices" or "8 tpu devices (TPU v5 lite), 2 hosts"."""
    platform, kinds = devices[0].platform, sorted({d.device_kind for d in devices})
    text = f"{len(devices)} {platform} device{'s' if len(devices) > 1 else ''}"
    if platform != "cpu":
        text += f" ({', '.join(kinds)})"
    hosts = len({d.process_index for d in devices})
    return text + (f", {hosts} hosts" if hosts > 1 else "")


def pmap(fn: Callable, devices: Sequence[jax.Device], donate_argnums=()) -> Callable:
    """`fn` mapped over `devices`, with collectives over `AXIS`."""
    return jax.pmap(fn, axis_name=AXIS, devices=list(devices), donate_argnums=donate_argnums)


def _fused(collective: Callable, tree: Any) -> Any:
    """Applies `collective` to all leaves of one dtype at once, as a single flat vector.

    XLA's CPU backend runs one all-reduce per leaf (~50 us each between two CPU devices here),
    so a parameter tree of 8 leaves cost 8 round trips per SGD step; one fused vector costs one.
    Accelerator backends combine all-reduces themselves, and there this is equally cheap.
    """
    leaves, treedef = jax.tree.flatten(tree)
    if len(leaves) <= 1:
        return jax.tree.unflatten(treedef, [collective(x, AXIS) for x in leaves])
    out = list(leaves)
    by_dtype: dict[Any, list[int]] = {}
    for i, x in enumerate(leaves):
        by_dtype.setdefault(jnp.result_type(x), []).append(i)
    for idx in by_dtype.values():
        flat = jnp.concatenate([jnp.ravel(leaves[i]) for i in idx])
        flat = collective(flat, AXIS)
        offset = 0
        for i in idx:
            size = int(np.prod(jnp.shape(leaves[i])))
            out[i] = jnp.reshape(flat[offset : offset + size], jnp.shape(leaves[i]))
            offset += size
    return jax.tree.unflatten(treedef, out)


def pmean(tree: Any) -> Any:
    """Mean over devices, in one collective per dtype; call inside a `pmap`ped program."""
    return _fused(jax.lax.pmean, tree)


def psum(tree: Any) -> Any:
    """Sum over devices, in one collective per dtype; call inside a `pmap`ped program."""
    return _fused(jax.lax.psum, tree)


def all_gather(tree: Any) -> Any:
    """Every device's values, stacked on a new leading device axis, on every device."""
    return jax.lax.all_gather(tree, AXIS)


def axis_index() -> jax.Array:
    """This device's index along the device axis, inside a `pmap`ped program."""
    return jax.lax.axis_index(AXIS)


def _sharding(devices: Sequence[jax.Device]) -> NamedSharding:
    return NamedSharding(Mesh(np.asarray(devices), (AXIS,)), P(AXIS))


def shard(tree: Any, devices: Sequence[jax.Device]) -> Any:
    """Places a tree whose leaves have leading axis len(devices): slice i on device i.

    Every process passes the whole (global) tree and keeps the slices of its own devices.
    """
    sharding = _sharding(devices)
    mine = np.asarray([d.process_index == jax.process_index() for d in devices])
    return jax.tree.map(
        lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x)[mine]), tree
    )


def split_leading(tree: Any, num_devices: int, axis: int = 0, drop_remainder: bool = False) -> Any:
    """Host leaves [..., N, ...] (N at `axis`) to [num_devices, ..., N // num_devices, ...]:
    device i gets the i-th contiguous block, ready for `shard`.

    N must divide over the devices, unless `drop_remainder` leaves out the last N mod D items.
    This is the one place that splits data for devices (environments, runs, datasets).
    """

    def split(x):
        x = np.asarray(x)
        n = x.shape[axis] // num_devices
        if drop_remainder:
            x = np.take(x, np.arange(n * num_devices), axis=axis)
        x = x.reshape((*x.shape[:axis], num_devices, n, *x.shape[axis + 1 :]))
        return np.moveaxis(x, axis, 0)

    return jax.tree.map(split, tree)


def replicate(tree: Any, devices: Sequence[jax.Device]) -> Any:
    """The same tree on every device."""
    n = len(devices)
    return shard(
        jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (n, *np.shape(x))), tree), devices
    )


def unreplicate(tree: Any) -> Any:
    """Device 0's copy of a replicated tree, as host numpy arrays."""
    return jax.tree.map(
        lambda x: (
            np.asarray(x.addressable_shards[0].data)[0]
            if hasattr(x, "addressable_shards")
            else np.asarray(x)[0]
        ),
        tree,
    )


def to_host(tree: Any) -> Any:
    """This process's devices' slices as host numpy arrays, leading (local) device axis."""

    def local(x):
        if getattr(x, "is_fully_addressable", True):
            return np.asarray(x)
        shards = sorted(x.addressable_shards, key=lambda sh: sh.index[0].start)
        return np.concatenate([np.asarray(sh.data) for sh in shards])

    return jax.tree.map(local, tree)


def max_divergence(tree: Any) -> float:
    """Largest absolute difference between any device's copy and device 0's (0.0 if identical).

    A cheap check that replicated state (parameters, optimiser state) has not drifted apart.
    """
    leaves = [np.asarray(x) for x in jax.tree.leaves(tree)]
    return max((float(np.max(np.abs(x - x[:1]))) for x in leaves if x.size), default=0.0)
