"""The documentation site: it builds with ``mkdocs build --strict``, and what it says matches the code."""

from __future__ import annotations

import html
import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGES = ("hpcgym", "synth", "agents", "baselines", "experiments", "benchmarks", "tests")
INSTALL = 'the docs tools are not installed: pip install -e ".[docs]" (mkdocs and mkdocstrings-python)'


def _require_docs_tools() -> None:
    """Fail (never skip) without mkdocs: CI installs the ``[docs]`` extra, so a missing tool is a broken setup."""
    missing = [m for m in ("mkdocs", "mkdocstrings", "mkdocstrings_handlers") if importlib.util.find_spec(m) is None]
    if not missing and importlib.util.find_spec("mkdocstrings_handlers.python") is None:
        missing.append("mkdocstrings-python")
    if missing:
        pytest.fail(f"{INSTALL}; missing: {', '.join(missing)}", pytrace=False)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built once from the repository root, strictly, into a temporary folder."""
    _require_docs_tools()
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    return out


def _text(page: Path) -> str:
    """A built page's visible text, with whitespace collapsed."""
    raw = re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8"))
    return " ".join(html.unescape(raw).split())


def test_site_builds_strict_and_every_page_is_there(site: Path) -> None:
    for page in ("index", "protocol/index", "definitions/index", "simulation/index", "cli/index", "architecture/index",
                 "results/index",
                 "benchmarks/index", "api/env/index", "api/sim/index", "api/data/index", "api/synth/index",
                 "api/agents/index", "api/baselines/index", "api/experiments/index", "extend/index", "traces/index",
                 "environments/index", "synthetic/index", "training/index", "journal/results-2026-11/index",
                 "journal/benchmarks-2026-11/index", "journal/2026-11-readme/index"):
        assert (site / f"{page}.html").is_file(), f"{page}.html is missing from the built site"


def test_every_page_is_reachable_from_the_index() -> None:
    """Following links from docs/index.md reaches every page of docs/ (the journal included)."""
    seen, todo = set(), [DOCS / "index.md"]
    while todo:
        page = todo.pop()
        if page in seen or not page.is_file():
            continue
        seen.add(page)
        for link in re.findall(r"\]\((?!https?:|#)([^)#\s]+\.md)", page.read_text(encoding="utf-8")):
            todo.append((page.parent / link).resolve())
    unreached = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if p.resolve() not in seen)
    assert not unreached, f"not reachable from docs/index.md: {unreached}"


def test_api_page_renders_the_environment_docstring(site: Path) -> None:
    from hpcgym.env import SchedulingEnv

    text = _text(site / "api" / "env" / "index.html")
    doc = inspect.getdoc(SchedulingEnv)
    assert "SchedulingEnv" in text
    summary = doc.splitlines()[0]
    assert summary in text, f"the API page lacks the SchedulingEnv docstring's summary {summary!r}"
    # A sentence from the body: the whole docstring is rendered, not just its first line.
    body = " ".join(doc.split("## Episode end", 1)[1].split("##", 1)[0].split())
    assert body in text, f"the API page lacks the SchedulingEnv docstring's 'Episode end' section {body!r}"


API_PAGES = ("env", "sim", "data", "synth", "agents", "baselines", "experiments")


def test_api_pages_render_roles_as_links_not_text(site: Path) -> None:
    """No reStructuredText role is left as text, and the roles to objects with a section are links to it."""
    for page in API_PAGES:
        raw = (site / "api" / page / "index.html").read_text(encoding="utf-8")
        literal = re.findall(r":(?:func|class|meth|mod|data|attr|exc):(?:<code>|`)", raw)
        assert not literal, f"api/{page}: {len(literal)} roles shown as text, e.g. {literal[:3]}"
    sim = (site / "api" / "sim" / "index.html").read_text(encoding="utf-8")
    # hpcgym.sim's docstring: ":func:`simulate` runs a whole stream" links to the section of hpcgym.sim.simulate
    assert re.search(r'<a class="autorefs autorefs-internal"[^>]*href="#hpcgym\.sim\.simulate"[^>]*><code>simulate'
                     r"</code></a> runs a whole stream", sim)
    env = (site / "api" / "env" / "index.html").read_text(encoding="utf-8")
    assert re.search(r'href="\.\./data/#hpcgym\.machines\.Machine"', env), "a role to another page is not a link"


def test_api_pages_document_each_object_once(site: Path) -> None:
    """A re-exported object has one section, where it is defined (not also under the package that imports it)."""
    import importlib

    seen: dict[int, str] = {}
    twice = []
    for page in API_PAGES:
        raw = (site / "api" / page / "index.html").read_text(encoding="utf-8")
        for path in re.findall(r'<h[2-6] id="([\w.]+)" class="doc doc-heading"', raw):
            module, _, name = path.rpartition(".")
            if importlib.util.find_spec(path.split(".")[0]) and _is_module(path):
                continue  # a module's own heading
            try:
                obj = getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError, ValueError):
                continue  # a module's own heading, or a member of a class
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if id(obj) in seen and seen[id(obj)] != path:
                twice.append(f"{path} and {seen[id(obj)]}")
            seen.setdefault(id(obj), path)
    assert seen and not twice, f"documented twice: {twice[:5]}"


def _is_module(path: str) -> bool:
    try:
        return importlib.util.find_spec(path) is not None
    except ModuleNotFoundError:
        return False


def test_pages_the_code_cites_exist() -> None:
    """Docstrings and help texts cite ``docs/<page>.md``: every cited page is in the repository and in the nav."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    cited: dict[str, str] = {}
    design = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.resolve() == Path(__file__).resolve():
                continue
            source = path.read_text(encoding="utf-8")
            design += [str(path.relative_to(ROOT))] if "DESIGN.md" in source else []
            for page in re.findall(r"docs/([\w/-]+\.md)", source):
                cited.setdefault(page, str(path.relative_to(ROOT)))
    assert cited, "no .py file cites a docs page: has the citation pattern changed?"
    for page, where in cited.items():
        assert (DOCS / page).is_file(), f"{where} cites docs/{page}, which does not exist"
        assert page in nav, f"{where} cites docs/{page}, which is not in mkdocs.yml's nav"
    assert not design, f"{design} cite DESIGN.md, which is not in the repository: cite a page of docs/ instead"


def test_cli_reference_lists_every_flag_of_every_tool() -> None:
    """docs/cli.md's help blocks have the flags the tools have now (regenerate with ``python docs/gen_cli.py``)."""
    spec = importlib.util.spec_from_file_location("gen_cli", DOCS / "gen_cli.py")
    gen_cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_cli)
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    documented = set(gen_cli.blocks(text))
    tools = {"hpcgym.traces", "baselines.run", "baselines.tune", "synth.fit", "synth.sample", "synth.report",
             "experiments.train", "experiments.evaluate", "experiments.compare", "experiments.seeds",
             "experiments.sweep", "experiments.recipe_sweep", "experiments.study", "experiments.plots",
             "experiments.noise_floor", "synth.ablation", "experiments.bench", "experiments.refit"}
    assert tools <= documented, f"docs/cli.md has no help block for {sorted(tools - documented)}"
    diffs = gen_cli.differences(text)
    assert not diffs, "docs/cli.md is out of date; run `python docs/gen_cli.py`:\n" + "\n".join(diffs)
