from django.db import migrations, models


def number_ended_targets(apps, schema_editor):
    # Targets that ended before numbering existed get theirs in the order they ended.
    target_model = apps.get_model("batch", "BatchTarget")
    ended = target_model.objects.filter(status__in=["done", "failed"]).order_by("job_id", "finished_at", "pk")
    job_id, seq = None, 0
    for target in ended.only("pk", "job_id").iterator():
        seq = seq + 1 if target.job_id == job_id else 1
        job_id = target.job_id
        target_model.objects.filter(pk=target.pk).update(seq=seq)


class Migration(migrations.Migration):
    dependencies = [
        ("batch", "0010_foreign_keys_without_own_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="batchtarget",
            name="seq",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(number_ended_targets, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="batchtarget",
            constraint=models.UniqueConstraint(fields=("job", "seq"), name="target_one_per_job_seq"),
        ),
    ]
