"""A webhook delivery belongs to an event, not to a job row (docs/webhooks.md).

The delivery gets a key of its own and carries what it sends: the event's id (``webhook-id``) and
type, the caller, the URL and the body, with an optional link to the job it concerns; attempts
belong to the delivery. Every existing delivery and attempt is carried over: a job's delivery
becomes its ``batch.finished`` event, under the ``webhook-id`` it was sent with (``msg_<job id>``),
so that a receiver dedupes a retry across the upgrade.
"""

import django.db.models.deletion
from django.db import migrations, models

BATCH_FINISHED = "batch.finished"


def deliveries_become_events(apps, schema_editor):
    old_delivery = apps.get_model("batch", "WebhookDelivery")
    old_attempt = apps.get_model("batch", "WebhookAttempt")
    delivery = apps.get_model("batch", "EventDelivery")
    attempt = apps.get_model("batch", "EventAttempt")
    for old in old_delivery.objects.select_related("job").iterator(chunk_size=500):
        new = delivery.objects.create(
            event_id=f"msg_{old.job_id}",
            event_type=BATCH_FINISHED,
            caller_id=old.job.caller_id,
            url=old.job.callback_url,
            host=old.host,
            body=old.body,
            job_id=old.job_id,
            created_at=old.created_at,
            due_at=old.due_at,
            attempt_count=old.attempts,
            delivered_at=old.delivered_at,
            gave_up_at=old.gave_up_at,
            sending_until=old.sending_until,
        )
        attempt.objects.bulk_create(
            attempt(delivery=new, at=a.at, status=a.status, error=a.error)
            for a in old_attempt.objects.filter(job_id=old.job_id).order_by("at", "pk")
        )


def events_become_deliveries(apps, schema_editor):
    old_delivery = apps.get_model("batch", "WebhookDelivery")
    old_attempt = apps.get_model("batch", "WebhookAttempt")
    delivery = apps.get_model("batch", "EventDelivery")
    # Before this migration a delivery needed its job: events of no job, or of another type, go.
    for new in delivery.objects.filter(event_type=BATCH_FINISHED, job__isnull=False).iterator(chunk_size=500):
        old_delivery.objects.create(
            job_id=new.job_id,
            body=new.body,
            created_at=new.created_at,
            due_at=new.due_at,
            attempts=new.attempt_count,
            delivered_at=new.delivered_at,
            gave_up_at=new.gave_up_at,
            host=new.host,
            sending_until=new.sending_until,
        )
        old_attempt.objects.bulk_create(
            old_attempt(job_id=new.job_id, at=a.at, status=a.status, error=a.error)
            for a in new.attempts.order_by("at", "pk")
        )


class Migration(migrations.Migration):
    dependencies = [
        ("batch", "0013_engine_task_paths"),
    ]

    operations = [
        # The new tables are made beside the old ones under other names (PostgreSQL keeps a renamed
        # table's key and sequence names), filled, and take the old tables' names once they are gone.
        migrations.RemoveIndex(model_name="webhookdelivery", name="webhook_due"),
        migrations.RemoveIndex(model_name="webhookdelivery", name="webhook_sending"),
        migrations.RemoveConstraint(model_name="webhookdelivery", name="webhook_due_delivered_or_given_up"),
        migrations.RemoveConstraint(model_name="webhookattempt", name="webhook_attempt_status_or_error"),
        migrations.CreateModel(
            name="EventDelivery",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("event_id", models.CharField(max_length=100, unique=True)),
                ("event_type", models.CharField(max_length=100)),
                ("url", models.TextField()),
                ("host", models.CharField(blank=True, default="", max_length=255)),
                ("body", models.TextField()),
                ("created_at", models.DateTimeField()),
                ("due_at", models.DateTimeField(blank=True, null=True)),
                ("attempt_count", models.PositiveIntegerField(default=0)),
                ("delivered_at", models.DateTimeField(blank=True, null=True)),
                ("gave_up_at", models.DateTimeField(blank=True, null=True)),
                ("sending_until", models.DateTimeField(blank=True, null=True)),
                (
                    "caller",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="webhook_deliveries",
                        to="batch.apikey",
                    ),
                ),
                (
                    "job",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="webhook_deliveries",
                        to="batch.batchjob",
                    ),
                ),
            ],
            options={
                "verbose_name": "webhook delivery",
                "verbose_name_plural": "webhook deliveries",
                "indexes": [
                    models.Index(fields=["due_at"], name="webhook_due"),
                    models.Index(fields=["sending_until"], name="webhook_sending"),
                ],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("delivered_at__isnull", True), ("due_at__isnull", False), ("gave_up_at__isnull", True)),
                            models.Q(("delivered_at__isnull", False), ("due_at__isnull", True), ("gave_up_at__isnull", True)),
                            models.Q(("delivered_at__isnull", True), ("due_at__isnull", True), ("gave_up_at__isnull", False)),
                            _connector="OR",
                        ),
                        name="webhook_due_delivered_or_given_up",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="EventAttempt",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("at", models.DateTimeField()),
                ("status", models.PositiveSmallIntegerField(blank=True, null=True)),
                ("error", models.TextField(blank=True, default="")),
                (
                    "delivery",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="attempts",
                        to="batch.eventdelivery",
                    ),
                ),
            ],
            options={
                "verbose_name": "webhook attempt",
                "ordering": ["delivery", "at", "pk"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("status__isnull", False), models.Q(("error", ""), _negated=True), _connector="OR"),
                        name="webhook_attempt_status_or_error",
                    )
                ],
            },
        ),
        migrations.RunPython(deliveries_become_events, events_become_deliveries),
        migrations.DeleteModel(name="WebhookAttempt"),
        migrations.DeleteModel(name="WebhookDelivery"),
        migrations.RenameModel(old_name="EventDelivery", new_name="WebhookDelivery"),
        migrations.RenameModel(old_name="EventAttempt", new_name="WebhookAttempt"),
    ]
