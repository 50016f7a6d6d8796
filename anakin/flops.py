"""What a program costs in arithmetic, counted on its jaxpr: hardware-independent numbers that
say what an accelerator will pay where a CPU cannot show it.

XLA's own cost analysis (`compiled.cost_analysis()`) counts the body of a loop once, whatever
its trip count, so for a training program (scans over updates, rollout steps and minibatches)
it is off by the product of those lengths. `count` walks the jaxpr instead and multiplies each
scan's body by its length. It counts the floating-point operations of matrix products and
convolutions (2 per multiply-add), which are what the networks cost; elementwise work and the
environments' arithmetic are left out, so it is a lower bound that the networks dominate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
from jax.extend import core as jex_core


class Flops(NamedTuple):
    """Matrix-product and convolution FLOPs of one call, and the loops whose trip count is
    unknown (`while`), each counted once."""

    flops: float
    unknown_loops: int


def count(fn: Callable, *args: Any, **kwargs: Any) -> Flops:
    """The FLOPs of one call of `fn(*args, **kwargs)` (arrays or ShapeDtypeStructs; a pmapped
    `fn` counts every device)."""
    closed = jax.make_jaxpr(fn)(*args, **kwargs)
    return _jaxpr(closed.jaxpr)


def _jaxpr(jaxpr: Any) -> Flops:
    flops, unknown = 0.0, 0
    for eqn in jaxpr.eqns:
        f, u = _eqn(eqn)
        flops, unknown = flops + f, unknown + u
    return Flops(flops, unknown)


def _sub(value: Any) -> Any:
    """The open jaxpr of a parameter that holds one (ClosedJaxpr or Jaxpr), else None."""
    if isinstance(value, jex_core.ClosedJaxpr):
        return value.jaxpr
    if isinstance(value, jex_core.Jaxpr):
        return value
    return None


def _eqn(eqn: Any) -> tuple[float, int]:
    name, params = eqn.primitive.name, eqn.params
    if name == "dot_general":
        (lhs_contract, _), _ = params["dimension_numbers"]
        lhs = eqn.invars[0].aval.shape
        out = eqn.outvars[0].aval.shape
        return 2.0 * math.prod(out) * math.prod(lhs[d] for d in lhs_contract), 0
    if name == "conv_general_dilated":
        rhs = eqn.invars[1].aval.shape  # kernel: its output-feature dim is in the output
        out = eqn.outvars[0].aval.shape
        out_features = rhs[params["dimension_numbers"].rhs_spec[0]]
        per_output = math.prod(rhs) / out_features  # input features x window
        return 2.0 * math.prod(out) * per_output, 0
    if name == "scan":
        inner = _jaxpr(params["jaxpr"].jaxpr)
        return inner.flops * params["length"], inner.unknown_loops
    if name == "while":
        body = _jaxpr(params["body_jaxpr"].jaxpr)
        cond = _jaxpr(params["cond_jaxpr"].jaxpr)
        return body.flops + cond.flops, body.unknown_loops + cond.unknown_loops + 1
    if name == "cond":
        branches = [_jaxpr(b.jaxpr) for b in params["branches"]]
        worst = max(branches, key=lambda b: b.flops)
        return worst.flops, worst.unknown_loops
    if name in ("xla_pmap",):
        inner = _jaxpr(params["call_jaxpr"])
        return inner.flops * params["axis_size"], inner.unknown_loops
    flops, unknown = 0.0, 0
    for value in params.values():  # pjit, custom_jvp/vjp, remat, shard_map, ...
        sub = _sub(value)
        if sub is not None:
            inner = _jaxpr(sub)
            flops, unknown = flops + inner.flops, unknown + inner.unknown_loops
    if name == "shard_map":
        devices = math.prod(params["mesh"].shape.values())
        flops *= devices
    return flops, unknown


def largest_value(fn: Callable, *args: Any, **kwargs: Any) -> int:
    """Bytes of the largest array one call of `fn` makes, per device for a pmapped `fn`
    (the values inside its per-device body; a plain function counts all of its own).

    Shapes are static, so this needs only the jaxpr: a program that would hold an array no
    device can (say the shuffles of a million SGD epochs) is found before it is compiled.
    Tracing is cached, so after `lower` this costs a walk of the jaxpr."""
    closed = jax.make_jaxpr(fn)(*args, **kwargs)
    inside = _largest(closed.jaxpr, inside=False)
    return inside if inside is not None else _largest(closed.jaxpr, inside=True) or 0


_PER_DEVICE = ("shard_map", "xla_pmap")  # primitives whose body holds one device's values


def peak_bytes(fn: Callable, *args: Any, **kwargs: Any) -> int:
    """A lower bound on the memory one call of `fn` holds at once, per device for a pmapped
    `fn`: the largest over its operations of the inputs and outputs one operation needs
    together, where an operation with a body (a loop, a branch) holds its inputs (a loop's
    carry) while its body runs. Tighter than `largest_value` for a program whose size is in
    many arrays of one batch (an evaluation's observations, states, keys and activations)."""
    closed = jax.make_jaxpr(fn)(*args, **kwargs)
    inside = _peak(closed.jaxpr, inside=False)
    return inside if inside is not None else _peak(closed.jaxpr, inside=True) or 0


def _nbytes_of(atoms: Any) -> int:
    total = 0
    for v in atoms:
        shape, dtype = getattr(v.aval, "shape", None), getattr(v.aval, "dtype", None)
        if shape is not None and dtype is not None and not isinstance(v, jex_core.Literal):
            total += math.prod(shape) * dtype.itemsize
    return total


def _peak(jaxpr: Any, inside: bool) -> int | None:
    """`peak_bytes` of `jaxpr` counted `inside` a per-device body (None: none found)."""
    best = None
    for eqn in jaxpr.eqns:
        held = _nbytes_of(eqn.invars)
        body = inside or eqn.primitive.name in _PER_DEVICE
        inner = [p for p in (_peak(sub, body) for sub in _bodies(eqn)) if p is not None]
        if inner:
            best = max(best or 0, (held if inside else 0) + max(inner))
        elif inside:
            best = max(best or 0, held + _nbytes_of(eqn.outvars))
    return best


def _largest(jaxpr: Any, inside: bool) -> int | None:
    """The largest value of `jaxpr` counted `inside` a per-device body (None: none found)."""
    best = None
    for eqn in jaxpr.eqns:
        if inside:
            for v in eqn.outvars:
                shape, dtype = getattr(v.aval, "shape", None), getattr(v.aval, "dtype", None)
                if shape is not None and dtype is not None:
                    best = max(best or 0, math.prod(shape) * dtype.itemsize)
        body = inside or eqn.primitive.name in _PER_DEVICE
        for sub in _bodies(eqn):
            inner = _largest(sub, body)
            if inner is not None:
                best = max(best or 0, inner)
    return best


def _bodies(eqn: Any) -> list[Any]:
    """The open jaxprs an equation holds (a loop's body, a cond's branches, a pmap's)."""
    return [
        sub
        for value in eqn.params.values()
        for sub in map(_sub, value if isinstance(value, (tuple, list)) else (value,))
        if sub is not None
    ]
