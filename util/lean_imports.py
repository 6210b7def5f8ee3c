"""kafka-python's and aiokafka's modules without their packages' ``__init__``, for a broker's start-up.

Both packages' ``__init__`` import their whole clients (``KafkaConsumer``, ``KafkaAdminClient``,
``AIOKafkaConsumer``, their networking: about 130 modules and about a fifth of a broker's start-up CPU), where
a broker reads only their protocol, error and record modules.  :func:`lean` registers such a package as
a module whose submodules import as usual and whose own ``__init__`` runs the first time a name it
defines is asked for (``kafka.KafkaConsumer``), so code that needs the clients sees no difference.
Only a process's entry point calls it, before anything has imported the package.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any, Callable

__all__ = ["lean"]


def lean(*names: str) -> None:
    """Register each installed package of ``names`` so that importing its submodules does not run its
    ``__init__``; a package already imported is left as it is."""
    for name in names:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            raise ImportError(f"{name!r} is not an installed package", name=name)
        module = importlib.util.module_from_spec(spec)
        module.__getattr__ = _on_first_name(module, spec)   # type: ignore[attr-defined]
        sys.modules[name] = module


def _on_first_name(module: ModuleType, spec: ModuleSpec) -> Callable[[str], Any]:
    lock = threading.RLock()   # one thread runs the __init__; another asking meanwhile waits for it
    ran = []

    def __getattr__(attr: str) -> Any:
        if not attr.startswith("__") and importlib.util.find_spec(f"{spec.name}.{attr}") is not None:
            return importlib.import_module(f"{spec.name}.{attr}")   # `from kafka import codec`: that module alone
        with lock:
            if not ran:            # (the __init__ itself asking for a name it has not made yet finds it ran)
                ran.append(True)
                assert spec.loader is not None
                spec.loader.exec_module(module)          # the package's own __init__, once
                del module.__getattr__   # type: ignore[attr-defined]
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {spec.name!r} has no attribute {attr!r}") from None
    return __getattr__
