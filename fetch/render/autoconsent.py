"""Where DuckDuckGo's ``@duckduckgo/autoconsent`` is: installed from npm by ``make`` (``npm ci``,
as ``package-lock.json`` pins it) into ``node_modules/`` at the checkout's root. The render
process reads it (``consent.py``); ``manage.py check`` warns when it is missing (``sift.W012``).
The standard library only: the render process and Django's checks both import it.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "node_modules" / "@duckduckgo" / "autoconsent"
LIBRARY = PACKAGE / "dist" / "autoconsent.cjs.js"
# The compact rules hold every platform's detection and reject; only the full ones hold accept.
COMPACT_RULES = PACKAGE / "rules" / "compact-rules.json"
FULL_RULES = PACKAGE / "rules" / "rules.json"


def installed() -> bool:
    return LIBRARY.is_file() and COMPACT_RULES.is_file() and FULL_RULES.is_file()
