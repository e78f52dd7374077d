"""``deliver_webhooks``: the Procfile's ``webhooks`` line, which sends every due webhook.

A loop: claim what is due within the senders' shares (a conditional update each), hand each
attempt to a sender thread, sleep until the next attempt falls due or a sender comes free, at
most a second. SIGTERM or SIGINT sets the stop flag: no new claim, the attempts in flight get
``STOP_GRACE_SECONDS`` to be recorded, the rest are given back due at once, and the command
logs what it did in one line. A database that goes away stops nothing: each round tries again.
"""

from __future__ import annotations

import logging
import signal
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.checks import Tags
from django.db import DatabaseError, connection
from django.utils import timezone

from batch.engine.reconnect import database_went_away
from batch.webhooks import delivery
from capacity.pacing import Every
from sift_site.long_running import LoggedChecksCommand

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# Shorter than honcho's five seconds before its SIGKILL (``make run``), so that unfinished
# attempts are given back rather than left to their lease; a stop ends well within 20 s.
STOP_GRACE_SECONDS = 4.0
CLEAN_UPS = Every(delivery.ATTEMPT_LEASE)


class Command(LoggedChecksCommand):
    help = (
        "Deliver due webhooks until SIGTERM or Ctrl-C: signed, within the senders' shares, retried "
        "with backoff (docs/webhooks.md). The Procfile's webhooks line; stops within 20 s."
    )

    # Not the URL configuration's check, which would import every door and the fetch pipeline.
    requires_system_checks = [Tags.models, Tags.compatibility, Tags.security]
    stop_signal = 0  # set in a handler, so a plain attribute
    failing = False  # since the last round that worked

    def handle(self, *args: Any, **options: Any) -> None:
        for stop_signal in STOP_SIGNALS:
            signal.signal(stop_signal, self.on_signal)
        senders = delivery.Senders(settings.SIFT_WEBHOOK_SENDING, delivery.load_sender())
        log.info("deliver_webhooks: running, %d senders", settings.SIFT_WEBHOOK_SENDING)
        while not self.stop_signal:
            senders.freed.clear()  # before looking: a sender freed meanwhile wakes the next round
            connection.close_if_unusable_or_obsolete()
            senders.freed.wait(self.deliver_round(senders))
        log.info("deliver_webhooks: %s, finishing the attempts in flight", signal.strsignal(self.stop_signal))
        given_back = 0 if senders.wait_idle(STOP_GRACE_SECONDS) else senders.release_unfinished()
        connection.close()
        tally = senders.tally
        log.info(
            "deliver_webhooks: %d attempts, %d delivered, %d failed, %d given back unfinished",
            tally["attempts"],
            tally["delivered"],
            tally["failed"],
            given_back,
        )

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop_signal = self.stop_signal or signum

    def deliver_round(self, senders: delivery.Senders) -> float:
        """Start every attempt due now that a share allows; answer how long to sleep."""
        began = timezone.now()
        try:
            if CLEAN_UPS.due(began):
                delivery.delete_ended_without_job()
            senders.start_due()
            pause = delivery.seconds_until_due(began)
        except DatabaseError as error:
            connection.close()  # a broken connection is never reused; the next round makes one
            if not self.failing:  # once a streak: a database that is down fails every round
                gone = database_went_away(error)
                what = "database unavailable" if gone else "a round failed"
                log.warning("deliver_webhooks: %s; trying again every second", what, exc_info=not gone)
            self.failing = True
            return delivery.POLL_SECONDS
        if self.failing:
            log.info("deliver_webhooks: the database answers again")
            self.failing = False
        return pause
