"""Defers gymnax's plotting imports until something actually plots.

`import gymnax` imports every environment module, and some of them import seaborn and
matplotlib.pyplot at the top for their `render` methods: about a second of start-up on a small
CPU, paid by every training run that never renders. Each module named here is stood in for by
a placeholder that imports the real module on its first attribute access and forwards to it,
so rendering still works, only later. (importlib's LazyLoader does not help here: on Python
3.11 a second `import` statement of a lazy module reads `__spec__` and loads it at once.)
"""

from __future__ import annotations

import importlib
import sys
import types

PLOTTING_MODULES = ("seaborn", "matplotlib.pyplot")


class _Deferred(types.ModuleType):
    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        real = self.__dict__.get("_deferred_real")
        if real is None:
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
            real = importlib.import_module(self.__name__)
            self.__dict__["_deferred_real"] = real
        return getattr(real, attr)


def defer_import(name: str) -> None:
    """Stands in for module `name` until it is used (no-op if already imported or absent)."""
    if name in sys.modules or importlib.util.find_spec(name.split(".")[0]) is None:
        return
    sys.modules[name] = _Deferred(name)


for _name in PLOTTING_MODULES:
    defer_import(_name)
