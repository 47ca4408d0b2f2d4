"""One-line errors for the command-line tools: user mistakes print ``error: ...`` and exit 2; bugs keep a traceback.

Adopt it in a CLI in three steps::

    from hpcgym import cli

    def main(argv=None) -> int:
        parser = cli.ArgumentParser(prog="python -m mypkg.tool", description=__doc__)
        parser.add_argument("--machine", type=cli.machine_arg, help=cli.MACHINE_HELP)
        parser.add_argument("--window", type=cli.positive_int, default=None)
        args = parser.parse_args(argv)
        ...
        return 0

    if __name__ == "__main__":
        raise SystemExit(cli.run(main))

API:

- ``run(main, argv=None) -> int``: calls ``main(argv)`` and returns its exit code. An expected user error is printed
  as ONE line ``error: <message>`` on stderr and gives exit code 2: any :class:`~hpcgym.errors.HpcgymError`
  (:class:`~hpcgym.errors.TraceFormatError`, :class:`~hpcgym.errors.InvalidJobError`,
  :class:`~hpcgym.errors.UnknownMachineError` with its "did you mean", :class:`~hpcgym.errors.EmptyTraceError`, ...),
  :class:`UsageError` (bad flags and flag values, from :class:`ArgumentParser`), every ``OSError`` (a missing file,
  a full disk, ...), ``ModuleNotFoundError`` (an extra or a plugin that is not installed), and ``ValueError``
  (raised for bad input values). Anything else (``KeyError``,
  ``IndexError``, ``TypeError``, ...) is a bug and propagates with its traceback. Set the environment variable
  ``HPCGYM_TRACEBACK=1`` to get the traceback of the expected errors too. ``Ctrl-C`` exits 130 without a traceback
  (with the interrupt's message, e.g. how to resume, when it has one).
- ``ArgumentParser``: :class:`argparse.ArgumentParser` whose errors raise :class:`UsageError` (one line through
  ``run``; exit 2 as argparse's own) instead of printing the usage block. Sub-parsers inherit it.
- Argument types that keep the reason in argparse's message: ``positive_int``, ``out_file`` (a file to write, not a
  folder), ``machine_arg`` (a
  :class:`~hpcgym.machines.Machine` from ``NAME|NODES[xCORES]``, see :func:`hpcgym.machines.parse`) and
  ``columns_arg`` (a column mapping from ``k=v,k=v``, see :func:`hpcgym.traces.csvtable.parse_columns`).
- ``alias(parser, old, new)``: keep a renamed flag's old spelling working, hidden from ``--help``, with a one-line
  deprecation note on stderr when it is used. The flags' vocabulary (one meaning per flag across the tools) is
  :data:`VOCABULARY`.
- ``load_jit()``: load numba's compiler registries now, without the ``scipy.linalg`` import numba makes only to
  check for BLAS (0.13 CPU-s of a CLI's start-up); for CLIs that run compiled code on every path.
- ``add_trace_args(parser)``: the ``--format``, ``--machine``, ``--columns``, ``--round`` and ``--on-duplicate``
  options every trace-reading CLI takes, passed on as ``traces.read(path, **read_options(args))``
  (``as_text=True``: checked, but kept as text for settings saved as JSON).
"""

from __future__ import annotations

import argparse
import errno
import gc
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from hpcgym.errors import HpcgymError

MACHINE_HELP = ("the machine: a catalog name (theta, sdsc-sp2, ...) or NODES[xCORES] such as 128 or 120x2 "
                "(processors map to ceil(procs / CORES) nodes); default: the trace's own (its header, the format's "
                "machine, or a Slurm/PBS log's largest job)")
COLUMNS_HELP = ("for --format csv: canonical name=CSV column pairs, e.g. interarrival=interval,run=run_time,"
                "nodes=node_num,walltime=wall_time,user=user (keys: submit|interarrival, run, nodes|procs, walltime, "
                "job_id, user, group, queue, status, wait)")
ROUND_HELP = ("how to round values that should be whole and are not (node or processor counts, times): a mode for "
              "every field (ceil, floor, nearest) or FIELD=MODE pairs, e.g. nodes=ceil,run=nearest (fields: submit, "
              "run, walltime, wait, nodes, procs); counted in the trace's repaired values. Default: such counts are "
              "an error; runtimes and walltimes round up, submit times down")
DUPLICATE_HELP = ("jobs whose id an earlier job has: warn (keep them, one warning; the default) or error")
EXIT_USAGE = 2
#: Expected errors of the environment rather than of the code: every ``OSError`` (a missing file, a full disk, a
#: read-only folder) and a module that is not installed (an optional extra, a plugin named in a saved model).
_FILE_ERRORS = (OSError, ModuleNotFoundError)


#: One meaning per flag name across the command-line tools (the renamed spellings are kept as deprecated aliases).
VOCABULARY: dict[str, str] = {
    "--jobs": "a number of jobs of a trace (synth.sample, synth.report); never processes",
    "--workers": "processes (or Ray CPUs) working at once (formerly --jobs in experiments.train, study, recipe_sweep)",
    "--window": "jobs per window (formerly --length in experiments.evaluate and baselines.tune)",
    "--windows": "how many windows",
    "--eval-window, --val-window": "jobs per test / validation window (formerly --eval-length, --val-length)",
    "--policy": "a heuristic's name (baselines.run)",
    "--network": "the agent's network (experiments.train; formerly --policy there)",
    "--seed, --seeds": "one seed; several seeds, one run each",
}


class UsageError(HpcgymError):
    """A bad command line (unknown flag, bad flag value), raised by :class:`ArgumentParser`."""


def plain(text: str | None) -> str | None:
    """Docstring markup made readable in a terminal: ``code`` and :role:`target` become `code` and target."""
    if text is None:
        return None
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    return text.replace("``", "`")


class ArgumentParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose errors raise :class:`UsageError` (one line through :func:`run`).

    Its description (usually the module docstring) is shown without reStructuredText markup.
    """

    def __init__(self, *args, description: str | None = None, **kwargs) -> None:
        super().__init__(*args, description=plain(description), **kwargs)

    def error(self, message: str) -> NoReturn:
        """Raise :class:`UsageError` instead of printing the usage block and exiting."""
        raise UsageError(f"{self.prog}: {message} (see --help)")


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


MAX_SEED = 2**32 - 1  # numpy's and SB3's seeding take seeds up to this


def seed_arg(text: str) -> int:
    """An argparse type: a seed, a whole number from 0 to :data:`MAX_SEED` (what numpy's and SB3's seeding take)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"a seed is between 0 and {MAX_SEED}, not {value}")
    return value


def out_file(text: str) -> Path:
    """An argparse type: a file to write, refused at once when it names an existing folder (not after the work)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file name (e.g. {path / 'out.csv'})")
    return path


def machine_arg(text: str):
    """An argparse type: a :class:`~hpcgym.machines.Machine` from ``NAME|NODES[xCORES]``."""
    from hpcgym import machines

    try:
        return machines.parse(text)
    except (ValueError, KeyError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def columns_arg(text: str) -> dict[str, str]:
    """An argparse type: a column mapping from ``k=v,k=v``."""
    from hpcgym.traces.csvtable import parse_columns

    try:
        return parse_columns(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def round_arg(text: str) -> str:
    """An argparse type: a rounding policy (see :func:`hpcgym.traces._io.parse_round`), kept as its text."""
    from hpcgym.traces._io import parse_round

    try:
        parse_round(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def read_options(args: argparse.Namespace) -> dict[str, object]:
    """The keyword arguments of :func:`hpcgym.traces.read` from the options of :func:`add_trace_args`."""
    return {"format": args.format, "machine": args.machine, "columns": args.columns, "round": args.round,
            "on_duplicate": args.on_duplicate}


def add_trace_args(parser: argparse.ArgumentParser, as_text: bool = False) -> None:
    """Add the options of every CLI that reads a trace (pass them on with :func:`read_options`).

    With ``as_text``, ``--machine`` and ``--columns`` are checked as usual but keep the text given, for settings
    that are saved as JSON (``experiments.train``'s ``args.json``) and passed to :func:`hpcgym.traces.read` later
    (``--round`` and ``--on-duplicate`` are text either way).
    """
    from hpcgym.traces import formats

    machine, columns = (_checked(machine_arg), _checked(columns_arg)) if as_text else (machine_arg, columns_arg)
    added = [n for n in formats.names() if n not in formats.BUILTIN]
    parser.add_argument("--format", choices=formats.names(), default=None,
                        help="the trace format: slurm is sacct --parsable2 output, pbs a PBS/Torque accounting log "
                        "or a directory of them" + (f"; {', '.join(added)}: added by installed packages" if added else
                                                    "") + " (default: .swf and .sacct by name, else from the first "
                        "line)")
    parser.add_argument("--machine", type=machine, default=None, metavar="NAME|NODES[xCORES]", help=MACHINE_HELP)
    parser.add_argument("--columns", type=columns, default=None, metavar="K=V,K=V", help=COLUMNS_HELP)
    parser.add_argument("--round", type=round_arg, default=None, metavar="MODE|FIELD=MODE,...", help=ROUND_HELP)
    parser.add_argument("--on-duplicate", choices=("warn", "error"), default="warn", help=DUPLICATE_HELP)


class _Deprecated(argparse.Action):
    """A renamed flag's old spelling: it stores into the new flag's value, and says once that it is deprecated."""

    def __init__(self, option_strings: list[str], dest: str, new: str = "", target: argparse.Action | None = None,
                 **kwargs) -> None:
        self.new, self.target = new, target
        super().__init__(option_strings, dest, **kwargs)

    noted: set[str] = set()  # each old spelling is noted once per process (some tools parse twice)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if option_string not in self.noted:
            self.noted.add(option_string)
            sys.stderr.write(f"note: {option_string} is deprecated; use {self.new} (it means the same)\n")
        self.target(parser, namespace, values, self.new)


def alias(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Make ``old`` a deprecated spelling of the flag ``new`` (already added): same value, hidden from ``--help``."""
    target = next(a for a in parser._actions if new in a.option_strings)
    parser.add_argument(old, dest=target.dest, action=_Deprecated, new=new, target=target, nargs=target.nargs,
                        type=target.type, choices=target.choices, default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                        metavar=target.metavar)


def _checked(parse: Callable[[str], object]) -> Callable[[str], str]:
    """An argparse type that checks the text with ``parse`` and returns the text itself ("" stands for unset)."""

    def check(text: str) -> str:
        if text:
            parse(text)
        return text

    check.__name__ = parse.__name__  # argparse names the type in its messages
    return check


def message(exc: BaseException) -> str:
    """The one-line text of an expected error."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        text = f"{exc.filename or 'a file'}: no space left on the device (free some space, or write elsewhere)"
    elif isinstance(exc, OSError) and exc.filename is not None:
        text = f"{exc.filename}: {exc.strerror or exc}"
    elif isinstance(exc, ModuleNotFoundError):
        text = f"{exc} (install the package that provides {exc.name!r})"
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def load_jit() -> None:
    """Load numba's typing and lowering registries (its first cached function would) without importing ``scipy.linalg``.

    Numba loads them all when a process first calls a compiled function, cached or not. Among them,
    ``numba.np.arraymath`` imports ``scipy.linalg`` (0.2 s with what scipy imports in turn, numpy.f2py included) only
    to set a flag that makes ``np.correlate`` and ``np.convolve`` use BLAS in compiled code; hpcgym's kernels call
    neither, and every other BLAS user (``np.dot``, ``np.linalg``) checks again when it is compiled. The module is
    hidden while the registries load, then ``scipy.linalg`` imports as usual. Does nothing once they are loaded.
    """
    blas = "scipy.linalg.cython_blas"
    if "numba.np.arraymath" in sys.modules or blas in sys.modules:
        return
    from numba.core.registry import cpu_target

    sys.modules[blas] = None  # an import of it raises ImportError: numba takes it as "no BLAS"
    try:
        cpu_target.target_context.refresh()
    finally:
        del sys.modules[blas]


def run(main: Callable[[Sequence[str] | None], int | None], argv: Sequence[str] | None = None) -> int:
    """Call ``main(argv)``; print expected user errors as one ``error:`` line on stderr and return 2.

    Returns:
        ``main``'s exit code (0 when it returns None), 2 after an expected error, 130 after ``Ctrl-C``.
    """
    # The imports are done: their objects (pandas', numba's, ...) live as long as the process. Frozen, the cyclic
    # garbage collector stops walking them at every full collection; numba's first cache load alone triggers
    # enough collections to cost a CLI 0.2-0.3 s of CPU (measured on baselines.run with HPC2N).
    gc.freeze()
    try:
        return int(main(argv) or 0)
    except (HpcgymError, ValueError, *_FILE_ERRORS) as exc:
        if os.environ.get("HPCGYM_TRACEBACK"):
            raise
        sys.stderr.write(f"error: {message(exc)}\n")
        return EXIT_USAGE
    except KeyboardInterrupt as exc:  # its message, when it has one, says how to go on (experiments.train: --resume)
        sys.stderr.write(f"interrupted{': ' + str(exc) if str(exc) else ''}\n")
        return 130
