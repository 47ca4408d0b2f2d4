"""Compile (and cache) the engine's and the environments' numba kernels once, e.g. before many processes start.

Usage: ``python benchmarks/warm_compile.py`` (:func:`hpcgym.jit.compile_kernels`).
"""

from hpcgym import jit

if __name__ == "__main__":
    jit.compile_kernels()
    print("compiled")
