"""What the Office Open XML formats share: a part's relationships, the main part of a package,
its title, and which of DOCX, XLSX or PPTX a package is.

The sandbox child runs this: standard library and lxml only.
"""

from __future__ import annotations

import posixpath

from fetch.documents.archive import Archive, parse

PACKAGE_RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_CORE_TITLE = "{http://purl.org/dc/elements/1.1/}title"
# The main part of each format, where the package's own relationships name none.
MAIN_PARTS = {"docx": "word/document.xml", "xlsx": "xl/workbook.xml", "pptx": "ppt/presentation.xml"}


def ooxml_kind(archive: Archive) -> str | None:
    """``docx``, ``xlsx`` or ``pptx`` for an Office Open XML package, else None."""
    if not archive.has("[Content_Types].xml"):
        return None
    main = part_path(archive, "", "officeDocument")
    for kind, default in MAIN_PARTS.items():
        if main.split("/", 1)[0] == default.split("/", 1)[0] or archive.has(default):
            return kind
    return None


def relationships(archive: Archive, part: str) -> dict[str, str]:
    """The relationships of ``part``, by id: an external target as it is (a link), an internal
    one as a path in the archive."""
    folder, name = posixpath.split(part)
    rels = posixpath.join(folder, "_rels", f"{name}.rels")
    if not archive.has(rels):
        return {}
    targets: dict[str, str] = {}
    for relation in parse(archive.open(rels)).iter(f"{PACKAGE_RELS}Relationship"):
        target = relation.get("Target", "")
        if relation.get("TargetMode") != "External":
            target = resolve(folder, target)
        targets[relation.get("Id", "")] = target
    return targets


def related(archive: Archive, part: str, kind: str) -> list[str]:
    """Paths of the parts ``part`` relates to by a relationship type ending in ``/kind``."""
    folder, name = posixpath.split(part)
    rels = posixpath.join(folder, "_rels", f"{name}.rels")
    if not archive.has(rels):
        return []
    return [
        resolve(folder, relation.get("Target", ""))
        for relation in parse(archive.open(rels)).iter(f"{PACKAGE_RELS}Relationship")
        if relation.get("Type", "").endswith(f"/{kind}") and relation.get("TargetMode") != "External"
    ]


def part_path(archive: Archive, default: str, kind: str) -> str:
    """The package's main part (its relationship of type ``kind``), else ``default``."""
    found = related(archive, "", kind)
    return found[0] if found else default


def resolve(folder: str, target: str) -> str:
    """A relationship's target as a path in the archive (absolute targets start at its root)."""
    if target.startswith("/"):
        return posixpath.normpath(target.lstrip("/"))
    return posixpath.normpath(posixpath.join(folder, target))


def core_title(archive: Archive) -> str | None:
    """The title in the core properties (``docProps/core.xml``), if any."""
    core = part_path(archive, "docProps/core.xml", "core-properties")
    if not archive.has(core):
        return None
    element = parse(archive.open(core)).find(_CORE_TITLE)
    title = (element.text or "").strip() if element is not None else ""
    return title or None
