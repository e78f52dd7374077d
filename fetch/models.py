"""The fetch pipeline's own tables: the gate's slots, the document cache and the hosts' turns
(docs/fetch-pipeline.md, docs/politeness.md).

They belong to the ``fetch`` app; nothing here knows about jobs.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class FetchSlot(models.Model):
    """One of ``FETCH_SLOTS`` places an upstream fetch can be in flight in, deployment-wide.

    ``holder`` is a random token of the fetch that owns the slot, ``caller`` the name of the
    caller it fetches for (so that a caller's slots can be counted across the deployment); a
    slot whose lease ran out belonged to a process that died and is free again.
    """

    number = models.PositiveSmallIntegerField(primary_key=True)
    holder = models.CharField(max_length=32, blank=True, default="")
    caller = models.CharField(max_length=100, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"fetch slot {self.number}"


class CachedDocument(models.Model):
    """An upstream answer as fetched, before extraction, so any options can reuse it.

    ``partition`` keeps caller classes apart: the fleet shares one, each restricted caller has
    its own (docs/fetch-pipeline.md).
    """

    partition = models.CharField(max_length=120)
    url = models.TextField()
    url_sha256 = models.CharField(max_length=64)
    final_url = models.TextField()
    status = models.PositiveSmallIntegerField()
    content_type = models.CharField(max_length=200, blank=True, default="")
    charset = models.CharField(max_length=60, blank=True, default="")
    etag = models.CharField(max_length=500, blank=True, default="")
    last_modified = models.CharField(max_length=100, blank=True, default="")
    body = models.BinaryField()
    n_bytes = models.PositiveIntegerField()
    fetched_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["fetched_at"], name="cache_fetched_at")]
        constraints = [
            models.UniqueConstraint(fields=["partition", "url_sha256"], name="cache_one_per_partition_url"),
            models.CheckConstraint(condition=~Q(partition=""), name="cache_partition_named"),
        ]

    def __str__(self) -> str:
        return f"{self.partition}:{self.url_sha256[:12]}"


class RenderSlot(models.Model):
    """One of ``RENDER_SLOTS`` places a browser may render in, deployment-wide (docs/rendering.md).

    Held like a ``FetchSlot``: a random ``holder`` token, the ``caller`` it renders for, and a
    lease that frees it if its process died.
    """

    number = models.PositiveSmallIntegerField(primary_key=True)
    holder = models.CharField(max_length=32, blank=True, default="")
    caller = models.CharField(max_length=100, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"render slot {self.number}"


class HostTurn(models.Model):
    """When the next upstream request to ``host`` may go out, deployment-wide (docs/politeness.md).

    Only kept while ``SIFT_FETCH_HOST_INTERVAL`` is on; a fetch takes its turn with a conditional
    update on ``next_at``, so two processes can never take the same turn.
    """

    host = models.CharField(max_length=255, primary_key=True)
    next_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["next_at"], name="host_turn_next_at")]

    def __str__(self) -> str:
        return f"host turn at {self.next_at:%H:%M:%S}"


class LastReading(models.Model):
    """A caller's last reading of a URL with given reading options, for ``changes: true``
    (docs/api.md, "Changes"): the whole text, compressed, that the next such reading is compared
    with. Kept per caller, never shared; ``scope`` keeps a monitor's readings apart from its
    caller's own. Each caller's rows are bounded by count and bytes, oldest evicted first.
    """

    caller = models.CharField(max_length=100)
    # SHA-256 of the scope, the URL and the options that shape the text.
    key = models.CharField(max_length=64)
    url = models.TextField()
    text = models.BinaryField()
    text_sha256 = models.CharField(max_length=64)
    n_bytes = models.PositiveIntegerField()
    read_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["caller", "read_at"], name="reading_caller_read_at")]
        constraints = [models.UniqueConstraint(fields=["caller", "key"], name="reading_one_per_caller_key")]

    def __str__(self) -> str:
        return f"{self.caller}:{self.key[:12]}"
