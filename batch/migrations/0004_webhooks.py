import django.db.models.deletion
from django.db import migrations, models

import batch.models


def give_each_key_its_own_secret(apps, schema_editor):
    # AddField filled existing rows with one value of the callable default: every key must differ.
    # Nobody has seen these secrets; an operator rotates a key's secret to show it (docs/webhooks.md).
    api_key = apps.get_model("batch", "ApiKey")
    for pk in api_key.objects.values_list("pk", flat=True):
        api_key.objects.filter(pk=pk).update(webhook_secret=batch.models.new_webhook_secret())


class Migration(migrations.Migration):
    dependencies = [
        ("batch", "0003_idempotency_header"),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="webhook_secret",
            field=models.CharField(default=batch.models.new_webhook_secret, editable=False, max_length=100),
        ),
        migrations.AddField(
            model_name="batchjob",
            name="callback_url",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.RunPython(give_each_key_its_own_secret, migrations.RunPython.noop),
        migrations.CreateModel(
            name="WebhookDelivery",
            fields=[
                (
                    "job",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="webhook",
                        serialize=False,
                        to="batch.batchjob",
                    ),
                ),
                ("body", models.TextField()),
                ("created_at", models.DateTimeField()),
                ("due_at", models.DateTimeField(blank=True, null=True)),
                ("attempts", models.PositiveIntegerField(default=0)),
                ("delivered_at", models.DateTimeField(blank=True, null=True)),
                ("gave_up_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "verbose_name": "webhook delivery",
                "verbose_name_plural": "webhook deliveries",
                "indexes": [models.Index(fields=["due_at"], name="webhook_due")],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(
                                ("delivered_at__isnull", True),
                                ("due_at__isnull", False),
                                ("gave_up_at__isnull", True),
                            ),
                            models.Q(
                                ("delivered_at__isnull", False),
                                ("due_at__isnull", True),
                                ("gave_up_at__isnull", True),
                            ),
                            models.Q(
                                ("delivered_at__isnull", True),
                                ("due_at__isnull", True),
                                ("gave_up_at__isnull", False),
                            ),
                            _connector="OR",
                        ),
                        name="webhook_due_delivered_or_given_up",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="WebhookAttempt",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("at", models.DateTimeField()),
                ("status", models.PositiveSmallIntegerField(blank=True, null=True)),
                ("error", models.TextField(blank=True, default="")),
                (
                    "job",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="webhook_attempts",
                        to="batch.batchjob",
                    ),
                ),
            ],
            options={
                "verbose_name": "webhook attempt",
                "ordering": ["job", "at", "pk"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            ("status__isnull", False), models.Q(("error", ""), _negated=True), _connector="OR"
                        ),
                        name="webhook_attempt_status_or_error",
                    )
                ],
            },
        ),
    ]
