from __future__ import annotations

import logging
import os
from typing import Any

from fetch.render import renderer, server_process
from sift_site.long_running import LoggedChecksCommand

logger = logging.getLogger(__name__)


class Command(LoggedChecksCommand):
    help = (
        "Run the machine's render process in the foreground (the Procfile's render line): "
        "Playwright loaded once, the browser started by the first render and closed after "
        "SIFT_RENDER_IDLE without one; SIGTERM or Ctrl-C stops it (docs/rendering.md)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if not renderer.available():
            # A process manager stops every line when one ends: with no browser this line waits.
            logger.warning("no Chromium: render: true answers 415; this line only waits")
            os.execvp("sleep", ["sleep", "infinity"])  # noqa: S606, S607 — coreutils' sleep, no input
        server_process.run_line()
