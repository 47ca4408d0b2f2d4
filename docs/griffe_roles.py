"""A Griffe extension for the API pages: roles become links, ``#:`` comments docstrings, each object is listed once.

The docstrings cross-reference with Sphinx roles (``:func:`simulate```, ``:class:`~hpcgym.machines.Machine```),
which the terminal help shows plainly (:func:`hpcgym.cli.plain`). Here, at ``mkdocs build``:

- each role becomes an optional cross-reference of mkdocs-autorefs, to the object's full path (a short name is
  resolved in the docstring's own scope, as Sphinx does; ``~`` keeps only the last name as the text). It is a link
  where that object has a section on the API pages, and plain code where it has none (a private helper, or a
  constant without a docstring), so an object that is not rendered never breaks the strict build;
- an attribute documented the Sphinx way, by a ``#:`` comment on the lines above it or at the end of its line (the
  habit of this code base: ``MAX_REDRAWS = 100  #: ...``), gets that comment as its docstring, so that it has a
  section and the roles that name it become links;
- a doctest (lines from ``>>>`` to the next blank line) becomes a ``pycon`` code block, so that Markdown leaves
  its output alone (``['fcfs+none', 'sjf+none']`` is not a link);
- a re-exported object (``hpcgym.sim.PriorityPolicy``, imported from ``hpcgym.sim.policy``) is dropped from the
  package that re-exports it when the module that defines it has its own section (``::: module`` in
  ``docs/api/*.md``), so that every object is documented once, where it lives.

``mkdocs.yml`` loads it (``extensions: [docs/griffe_roles.py]``); ``tests/test_docs.py`` checks the built pages.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|exc|obj|const):`(?P<target>[^`]+)`")
PAGES = Path(__file__).resolve().parent / "api"


def rendered_modules() -> set[str]:
    """The modules that have a section of their own on the API pages (``::: module``)."""
    found = set()
    for page in PAGES.glob("*.md"):
        found |= set(re.findall(r"^::: ([\w.]+)\s*$", page.read_text(), flags=re.M))
    return found


def full_path(obj: griffe.Object, target: str) -> str:
    """The full path a role's target names, resolved in ``obj``'s scope when it is not a full path already."""
    head, _, rest = target.partition(".")
    try:
        found = obj.resolve(head)
    except (griffe.NameResolutionError, ValueError, KeyError):
        return target
    return f"{found}.{rest}" if rest else found


def autoref(obj: griffe.Object, match: re.Match) -> str:
    """The optional autorefs cross-reference of one role (its text: the target, or its last name after ``~``)."""
    target = match["target"].strip()
    short = target.startswith("~")
    target = target.lstrip("~").removesuffix("()")
    title = target.rsplit(".", 1)[-1] if short else target
    identifier = html.escape(full_path(obj, target))
    return f'<autoref identifier="{identifier}" optional><code>{html.escape(title)}</code></autoref>'


def comment_docstring(attr: griffe.Object) -> str | None:
    """The ``#:`` comment of an attribute: at the end of its line, else on the lines right above it."""
    try:
        lines = attr.lines_collection[attr.filepath]
    except (KeyError, AttributeError, TypeError):
        return None
    if not attr.lineno or attr.lineno > len(lines):
        return None
    own = lines[attr.lineno - 1]
    if "#:" in own:
        return own.split("#:", 1)[1].strip()
    above = []
    for line in reversed(lines[:attr.lineno - 1]):
        if not line.strip().startswith("#:"):
            break
        above.insert(0, line.strip()[2:].strip())
    return " ".join(above) or None


def fence_doctests(text: str) -> str:
    """Doctest blocks (from a ``>>>`` line at the left margin to the next blank line) as fenced ``pycon`` blocks."""
    out: list[str] = []
    block: list[str] = []

    def flush() -> None:
        if block:
            out.extend([*([""] if out and out[-1].strip() else []), "```pycon", *block, "```"])
            block.clear()

    for line in text.split("\n"):
        if line.startswith(">>>") or (block and line.strip()):
            block.append(line)
            continue
        flush()
        out.append(line)
    flush()
    return "\n".join(out)


def _walk(obj: griffe.Object) -> Any:
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)


class RolesToLinks(griffe.Extension):
    """Roles to optional cross-references, and re-exports dropped where the defining module has a section."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        """Rewrite every docstring of the package, then drop the re-exports documented at home."""
        for obj in _walk(pkg):
            if obj.is_attribute and obj.docstring is None and (text := comment_docstring(obj)):
                obj.docstring = griffe.Docstring(text, parent=obj)
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = ROLE.sub(lambda m, o=obj: autoref(o, m), obj.docstring.value)
            if obj.docstring is not None and ">>>" in obj.docstring.value:
                obj.docstring.value = fence_doctests(obj.docstring.value)
        homes = rendered_modules()
        for module in (o for o in _walk(pkg) if o.is_module):
            for name, member in list(module.members.items()):
                if member.is_alias and member.target_path.rpartition(".")[0] in homes:
                    module.del_member(name)
