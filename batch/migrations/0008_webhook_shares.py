from urllib.parse import urlsplit

from django.db import migrations, models


def hosts_of_waiting_deliveries(apps, schema_editor):
    # A delivery still to be attempted counts against its receiving host's share of the senders
    # (docs/webhooks.md); delivered and given-up ones are never claimed again.
    delivery = apps.get_model("batch", "WebhookDelivery")
    for pk, url in delivery.objects.filter(due_at__isnull=False).values_list("pk", "job__callback_url"):
        delivery.objects.filter(pk=pk).update(host=(urlsplit(url).hostname or "").lower().rstrip("."))


class Migration(migrations.Migration):
    dependencies = [
        ("batch", "0007_target_outcome_document_changed"),
    ]

    operations = [
        migrations.CreateModel(
            name="WebhookClaimLock",
            fields=[
                ("id", models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False)),
            ],
            options={
                "constraints": [
                    models.CheckConstraint(condition=models.Q(("id", 1)), name="webhookclaimlock_single_row")
                ],
            },
        ),
        migrations.AddField(
            model_name="webhookdelivery",
            name="host",
            field=models.CharField(blank=True, default="", max_length=255),
        ),
        migrations.AddField(
            model_name="webhookdelivery",
            name="sending_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="webhookdelivery",
            index=models.Index(fields=["sending_until"], name="webhook_sending"),
        ),
        migrations.RunPython(hosts_of_waiting_deliveries, migrations.RunPython.noop),
    ]
