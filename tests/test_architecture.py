"""docs/architecture.md's module map names every source module, so a reader can find each one."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "docs" / "architecture.md"
PACKAGES = ("batch", "doors", "fetch", "capacity", "sift_site")


def _sections() -> dict[str, str]:
    """Each ``### `package/` `` heading of the module map, with the text under it."""
    text = MAP.read_text()
    parts = re.split(r"^### `([a-z_]+)/`.*$", text, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def _modules(package: str) -> list[str]:
    base = ROOT / package
    return sorted(
        str(path.relative_to(base))
        for path in base.rglob("*.py")
        if "migrations" not in path.parts and path.name != "__init__.py"
    )


def _named(module: str, section: str) -> bool:
    """The module's path, or a folder holding it (``management/commands/``), in backticks."""
    names = set(re.findall(r"`([^`]+)`", section))
    folders = {name for name in names if name.endswith("/")}
    return module in names or any(module.startswith(folder) for folder in folders)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_source_module_is_in_the_module_map(package):
    section = _sections().get(package)
    assert section is not None, f"docs/architecture.md has no '### `{package}/`' section"
    missing = [module for module in _modules(package) if not _named(module, section)]
    assert missing == [], f"modules missing from the {package}/ map in docs/architecture.md: {missing}"


def test_the_map_names_no_module_that_does_not_exist():
    for package, section in _sections().items():
        for name in re.findall(r"^\| `([^`]+\.py)`", section, flags=re.MULTILINE):
            gone = f"docs/architecture.md lists {package}/{name}, which is gone"
            assert (ROOT / package / name).exists(), gone


def test_the_render_process_imports_only_the_standard_library_playwright_itself_and_its_log_lines():
    """It runs with no secret and no route (docs/rendering.md): no Django, nothing of sift."""
    in_the_process = (
        "server",
        "tab",
        "visit",
        "consent",
        "autoconsent",
        "actions",
        "screenshot",
        "visibility",
    )
    for name in (f"render/{module}.py" for module in in_the_process):
        tree = ast.parse((ROOT / "fetch" / name).read_text())
        nodes = list(ast.walk(tree))
        imported = {alias.name for node in nodes if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module or "" for node in nodes if isinstance(node, ast.ImportFrom)}
        foreign = {
            module
            for module in imported
            if module.split(".")[0] not in sys.stdlib_module_names
            and module.split(".")[0] != "playwright"
            and module
            not in {
                "fetch.render",
                "sift_site.log_lines",
                *(f"fetch.render.{module}" for module in in_the_process),
            }
        }
        assert foreign == set(), f"fetch/{name} imports {foreign}"
