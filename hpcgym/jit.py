"""Where numba keeps hpcgym's compiled kernels: a cache folder keyed on a hash of the kernels' sources.

numba's on-disk cache keys each compiled function on its own file only, not on the files of the functions it
inlines or calls: after an edit of ``hpcgym/sim/backfill.py``, the event loop in ``loop.py`` would keep running the
old backfilling from the cache. So ``import hpcgym`` points ``NUMBA_CACHE_DIR`` (before any kernel is compiled or
loaded) at ``<user cache>/hpcgym/numba/<hash>``, the hash covering every hpcgym source file that defines a kernel:
an edit of any of them starts a fresh folder, and an edited kernel is always the one that runs (after one
compilation). A ``NUMBA_CACHE_DIR`` set by the user is left alone. Folders of other sources unused for
:data:`KEEP_DAYS` days are removed.

Compiling takes memory: numba and LLVM hold about 1 GB while the kernels compile, and the process keeps most of it
after (its heap is fragmented). :func:`compile_apart` therefore compiles them in a child process, whose memory goes
back to the system when it ends, when this source's folder holds no kernel yet (a fresh clone, an edited kernel);
the process that called it then loads them from the cache. The child runs :func:`compile_kernels`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Cache folders of other sources (another checkout, an older edit) are removed after this many days unused.
KEEP_DAYS = 30
_ROOT = Path(__file__).resolve().parent


def sources_hash(root: Path = _ROOT) -> str:
    """A short hash of the package's kernel sources: every ``.py`` file under ``root`` that uses ``njit``."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        if b"njit" in data:
            digest.update(str(path.relative_to(root)).encode() + b"\0" + data + b"\0")
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    """The folder that holds one cache folder per source hash (``$XDG_CACHE_HOME/hpcgym/numba``, or ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "hpcgym" / "numba"


#: The folder :func:`use_source_keyed_cache` set (None: the user's ``NUMBA_CACHE_DIR``, or not set yet).
FOLDER: Path | None = None


def use_source_keyed_cache() -> Path | None:
    """Point ``NUMBA_CACHE_DIR`` at this source's folder (unless the user set it); return the folder (None: unset).

    Called by ``hpcgym/__init__.py`` before anything is compiled. A home folder that cannot be written falls back to
    the temporary folder.
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    key = sources_hash()
    for root in (cache_root(), Path(tempfile.gettempdir()) / f"hpcgym-numba-{os.getuid()}"):
        folder = root / key
        try:
            fresh = not folder.is_dir()
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        os.environ["NUMBA_CACHE_DIR"] = str(folder)
        global FOLDER
        FOLDER = folder
        if "numba" in sys.modules:  # imported before hpcgym: make it read the variable again
            from numba.core import config

            config.reload_config()
        if fresh:
            _remove_unused(root, folder)
        return folder
    return None


def _remove_unused(root: Path, keep: Path) -> None:
    """Remove the cache folders of other sources that nothing has used for :data:`KEEP_DAYS` days."""
    cutoff = time.time() - KEEP_DAYS * 86400
    for folder in root.iterdir():
        try:
            if folder != keep and folder.is_dir() and folder.stat().st_mtime < cutoff:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            pass  # another process removed it first


def compiled(folder: Path | None = None) -> bool:
    """Whether the cache folder (default: this source's, :data:`FOLDER`) holds compiled kernels."""
    folder = folder or FOLDER
    return folder is not None and any(folder.rglob("*.nbi"))


def compile_apart() -> bool:
    """Compile the kernels in a child process (:func:`compile_kernels`) if this source's cache holds none yet.

    Returns whether a child compiled them (False: they were there, or the user set ``NUMBA_CACHE_DIR``). A child
    that fails leaves the work to this process, which compiles what it calls as usual.
    """
    if FOLDER is None or compiled():
        return False
    subprocess.run([sys.executable, "-c", "from hpcgym import jit; jit.compile_kernels()"], stdout=subprocess.DEVNULL,
                   check=False)
    return True


def compile_kernels() -> None:
    """Compile into the cache every kernel that simulations, environments and the SWF reader call.

    The vector environment is stepped once and a simulation run, with and without backfilling, on a window of the
    Lublin trace (read from its SWF file).
    """
    import numpy as np

    from hpcgym.registration import make_vec  # submodules: the package imports this module first
    from hpcgym.sim import simulate
    from hpcgym.sim.policy import PriorityPolicy
    from hpcgym.traces import load, window

    for backfill in ("none", "easy"):
        envs = make_vec("lublin-256-v0", num_envs=2, backfill=backfill)
        envs.reset(seed=0)
        envs.step(np.zeros(2, np.int64))
        simulate(window(load("lublin-256"), 64, rng=0), "lublin-256", PriorityPolicy("fcfs", 0), backfill=backfill)
