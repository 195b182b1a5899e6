"""A package's public API, imported when a name of it is first asked for (PEP 562), so that importing one module of
a package does not import all of it: `progressivectl` imports `controller.service.control` and not, with it, the
day's reports and the journal. The package imports the same names under TYPE_CHECKING, for the type checker."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], object]:
    """The package's `__getattr__`: `exports` maps each name to the module (relative to `package`) that defines
    it; any other name is an AttributeError, as without it."""

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__


__all__ = ["lazy_exports"]
