"""The layout's rules, checked on the source: imports run down the layers of docs/architecture.md (hpcgym imports
nothing upstream), never form a cycle, and that page names every module that exists and none that does not."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import hpcgym
import hpcgym.sim
from hpcgym.errors import UnknownMachineError, UnknownNameError

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("hpcgym", "synth", "agents", "baselines", "experiments")
UPSTREAM = ("synth", "agents", "baselines", "experiments")  # what hpcgym must not reach, by import or by string


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The project modules that ``name`` imports (anywhere in the file), each as the most specific module."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def test_hpcgym_imports_nothing_upstream():
    bad = {m: sorted(t for t in targets if t.split(".")[0] in UPSTREAM)
           for m, targets in GRAPH.items() if m.split(".")[0] == "hpcgym"}
    assert not {m: t for m, t in bad.items() if t}


ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _layers(text: str) -> list[set[str]]:
    """The packages of each layer of the architecture page, top layer first."""
    block = re.search(r"<!-- layers[^>]*-->\s*```text\n(.*?)```\s*<!-- /layers -->", text, re.S)
    assert block, "docs/architecture.md has no <!-- layers --> block"
    return [set(line.split()) for line in block.group(1).splitlines() if line.strip()]


def _against_layers(graph: dict[str, set[str]], layers: list[set[str]]) -> list[str]:
    """Every import from one package into another that is not on a lower layer."""
    level = {pkg: i for i, layer in enumerate(layers) for pkg in layer}
    bad = []
    for source, targets in graph.items():
        for target in targets:
            a, b = source.split(".")[0], target.split(".")[0]
            if a != b and level[b] <= level[a]:
                bad.append(f"{source} imports {target}")
    return sorted(bad)


def test_imports_run_down_the_layers_of_the_architecture_page():
    layers = _layers(ARCHITECTURE.read_text())
    named = [pkg for layer in layers for pkg in layer]
    assert sorted(named) == sorted(PACKAGES), "each package stands on exactly one layer of docs/architecture.md"
    assert _against_layers(GRAPH, layers) == []


def test_the_layer_check_can_fail():
    layers = [{"top"}, {"left", "right"}, {"base"}]
    graph = {"top.a": {"left.b", "base.c"}, "left.b": {"right.d", "base.c"}, "base.c": {"top.a"}, "right.d": set()}
    assert _against_layers(graph, layers) == ["base.c imports top.a", "left.b imports right.d"]


def test_the_architecture_page_names_every_module_and_only_those():
    text = ARCHITECTURE.read_text()
    packages = "|".join(PACKAGES)
    named = set(re.findall(rf"`((?:{packages})/[\w/]*?(?:\.py|/))`", text))
    assert [n for n in sorted(named) if not (ROOT / n).exists()] == [], "the page names modules that do not exist"
    present = {str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).glob("*.py")
               if p.name not in ("__init__.py", "__main__.py")}
    present |= {f"{p.relative_to(ROOT)}/" for pkg in PACKAGES for p in (ROOT / pkg).iterdir()
                if (p / "__init__.py").exists()}
    assert sorted(present - named) == [], "docs/architecture.md should say what these modules own"


def test_hpcgym_names_no_upstream_module_in_strings():
    spec = re.compile(rf"^({'|'.join(UPSTREAM)})(\.\w+)*(:\w+)?$")
    hits = []
    for name, path in MODULES.items():
        if name.split(".")[0] != "hpcgym":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and spec.match(node.value):
                hits.append(f"{name}: {node.value!r}")
    assert not hits


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert _cycles(GRAPH) == []


def test_the_cycle_check_can_fail():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_sim_package_has_one_file_per_concept():
    sim = {p.stem for p in (ROOT / "hpcgym" / "sim").glob("*.py")}
    assert {"queue", "backfill", "conservative", "events", "loop", "state"} <= sim
    doc = hpcgym.sim.__doc__
    missing = [stem for stem in sim - {"__init__"} if f"``{stem}.py``" not in doc]
    assert not missing, f"the package docstring should say what {missing} hold"


@pytest.mark.parametrize("lookup, kind", [
    (lambda: hpcgym.make("thta-v0"), "environment id"),
    (lambda: hpcgym.traces.load("thta"), "trace"),
    (lambda: hpcgym.sim.heuristics.get("wfp"), "policy"),
])
def test_unknown_names_say_what_was_looked_up(lookup, kind):
    with pytest.raises(UnknownNameError) as err:
        lookup()
    assert err.value.kind == kind and f"Unknown {kind}" in str(err.value)
    assert not isinstance(err.value, UnknownMachineError)
    assert isinstance(err.value, KeyError)  # callers that catch KeyError keep working


def test_unknown_machine_is_an_unknown_name():
    with pytest.raises(UnknownNameError, match="Unknown machine 'thta'") as err:
        hpcgym.machines.get("thta")
    assert isinstance(err.value, UnknownMachineError) and err.value.kind == "machine"
