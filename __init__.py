"""Not the psyattrs package: the package's code is in `src/attrs/`.

This file exists for one mistake only. A script run from the folder that holds a clone of this
repository named `psyattrs/` would `import psyattrs` as that folder: the script's folder comes
first on `sys.path`, and without this file Python made the clone an empty namespace package
(`module 'psyattrs' has no attribute 'predict'`). With it, the clone is found as this module,
which looks for the real package elsewhere (the rest of `sys.path`, then the import hooks of an
editable install) and loads that in its place; it warns when that package is not this clone's
code (your edits here would not be the code that runs), and when there is no installed psyattrs
at all it raises an ImportError that says so and how to install it.
"""

import importlib.machinery
import importlib.util
import os
import sys
import warnings

_CLONE = os.path.dirname(os.path.abspath(__file__))
_CODE = os.path.join(_CLONE, "src", "attrs")


def _same(a: "str | None", b: str) -> bool:
    try:
        return a is not None and os.path.samefile(a, b)
    except OSError:
        return False


def _real_spec(name: str) -> "importlib.machinery.ModuleSpec | None":
    """The spec of the installed package `name`, found anywhere but in this clone."""
    parent = os.path.dirname(_CLONE)
    paths = [p for p in sys.path if not _same(os.path.abspath(p or os.curdir), parent)]
    candidates = [importlib.machinery.PathFinder.find_spec(name, paths)]
    for finder in sys.meta_path:  # an editable install's finder (after the path finder)
        if finder is importlib.machinery.PathFinder or not hasattr(finder, "find_spec"):
            continue
        try:
            candidates.append(finder.find_spec(name, None))
        except Exception:  # noqa: BLE001 - a third-party hook that cannot answer is no answer
            continue
    for spec in candidates:
        if spec is None or spec.loader is None or spec.origin is None:
            continue  # nothing, or another namespace portion
        if not _same(spec.origin, os.path.abspath(__file__)):
            return spec
    return None


def _load_real(name: str) -> None:
    spec = _real_spec(name)
    if spec is None:
        raise ImportError(
            f"`import {name}` found the folder {_CLONE} (a clone of the psyattrs repository, next to the "
            f"script), not the installed package, and this Python ({sys.executable}) has no psyattrs installed: "
            f"install it (`pip install -e {_CLONE}`, or `make venv` there and use {_CLONE}/.venv/bin/python), "
            "or run the script from another folder",
            name=name,
        )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # the import statement returns what sys.modules holds after this file ran
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    locations = list(spec.submodule_search_locations or [])
    if not any(_same(location, _CODE) for location in locations):
        warnings.warn(
            f"the folder {_CLONE} next to this script is named like the package; psyattrs was loaded from "
            f"{locations[0] if locations else spec.origin} instead, so edits in {_CLONE} do not run here "
            "(run the script from another folder, or rename the clone)",
            UserWarning,
            stacklevel=2,
        )


if __name__ == "psyattrs":  # imported as the package (not run, not imported under another name)
    _load_real(__name__)
