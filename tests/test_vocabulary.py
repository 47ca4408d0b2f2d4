"""The command lines: every tool has --help, every flag has help and shows its default, and one flag name means one
thing across the tools (``hpcgym.cli.VOCABULARY``); renamed flags keep working with one deprecation note."""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcgym import cli

REPO = Path(__file__).resolve().parents[1]
TOOLS = ("hpcgym.traces.__main__", "baselines.run", "baselines.tune", "synth.fit", "synth.sample", "synth.report",
         "synth.ablation",
         "experiments.train", "experiments.evaluate", "experiments.compare", "experiments.seeds", "experiments.sweep",
         "experiments.recipe_sweep", "experiments.study", "experiments.plots")


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser):
        self.parser = parser


def parser_of(tool: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The tool's parser, caught when its ``main`` asks it to parse (nothing runs)."""

    def caught(self, *args, **kwargs):
        raise _Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", caught)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", caught)
    with pytest.raises(_Parsed) as got:
        importlib.import_module(tool).main([])
    return got.value.parser


def options(parser: argparse.ArgumentParser) -> list[tuple[argparse.ArgumentParser, argparse.Action]]:
    """Every action of a parser and of its sub-commands."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += options(sub)
        elif not isinstance(action, argparse._HelpAction):
            found.append((parser, action))
    return found


@pytest.fixture(scope="module")
def parsers() -> dict[str, argparse.ArgumentParser]:
    with pytest.MonkeyPatch.context() as mp:
        return {tool: parser_of(tool, mp) for tool in TOOLS}


def _shows_default(parser: argparse.ArgumentParser, action: argparse.Action) -> bool:
    if issubclass(parser.formatter_class, argparse.ArgumentDefaultsHelpFormatter):
        return True
    return "default" in (action.help or "").lower()


@pytest.mark.parametrize("tool", TOOLS)
def test_every_flag_has_help_and_shows_its_default(tool, parsers):
    missing, silent = [], []
    for parser, action in options(parsers[tool]):
        if isinstance(action, cli._Deprecated):
            assert action.help == argparse.SUPPRESS  # old spellings are hidden, their new flag says "formerly"
            continue
        name = "/".join(action.option_strings) or action.dest
        if not action.help or action.help == argparse.SUPPRESS:
            missing.append(name)
        has_default = action.default not in (None, False, [], "", argparse.SUPPRESS) and not action.required
        if action.option_strings and has_default and not _shows_default(parser, action):
            silent.append(f"{name} (default {action.default!r})")
    assert not missing, f"{tool}: flags without help: {missing}"
    assert not silent, f"{tool}: flags whose help does not show the default: {silent}"


@pytest.mark.parametrize("tool", ["hpcgym.traces", "experiments.plots", "experiments.study", "baselines.tune"])
def test_help_prints_help_and_does_nothing_else(tool, tmp_path):
    done = subprocess.run([sys.executable, "-m", tool, "--help"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert done.returncode == 0 and done.stdout.startswith("usage: python -m"), done.stderr[-2000:]
    assert not any(tmp_path.iterdir()), "--help wrote files"


def test_one_flag_one_meaning(parsers):
    """--jobs counts jobs and --workers processes; --policy is a heuristic; --window is jobs per window."""
    for tool, parser in parsers.items():
        for _, action in options(parser):
            if isinstance(action, cli._Deprecated):
                continue
            text = (action.help or "").lower()
            for flag in action.option_strings:
                if flag == "--jobs":
                    assert "process" not in text and "jobs" in text, (tool, text)
                if flag == "--workers":
                    assert "process" in text, (tool, text)
                if flag == "--policy":
                    assert tool == "baselines.run" and "heuristic" in text, (tool, text)
                if flag in ("--window", "--eval-window", "--val-window"):
                    assert "jobs per" in text, (tool, flag, text)
                assert flag not in ("--length", "--eval-length", "--val-length"), (tool, flag)


def test_old_spellings_still_work_with_one_note(capsys):
    from experiments import train

    cli._Deprecated.noted.clear()
    old = train.parse_args(["--eval-length", "512", "--val-length", "256", "--jobs", "3", "--policy", "mlp"])
    new = train.parse_args(["--eval-window", "512", "--val-window", "256", "--workers", "3", "--network", "mlp"])
    recipe = old.recipe
    assert old == new and (recipe.run.eval_length, recipe.selection.val_length, old.jobs, recipe.network.policy) == (
        512, 256, 3, "mlp")
    notes = capsys.readouterr().err.strip().splitlines()
    assert notes == [f"note: {o} is deprecated; use {n} (it means the same)" for o, n in
                     (("--eval-length", "--eval-window"), ("--val-length", "--val-window"), ("--jobs", "--workers"),
                      ("--policy", "--network"))]
