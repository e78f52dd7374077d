from django.db import migrations, models


def delete_extra_submit_locks(apps, schema_editor):
    # Every submit that creates a job locks the one row left (docs/decisions.md).
    submit_lock = apps.get_model("batch", "SubmitLock")
    submit_lock.objects.filter(pk__gt=1).delete()
    submit_lock.objects.get_or_create(pk=1)


def create_submit_locks(apps, schema_editor):
    submit_lock = apps.get_model("batch", "SubmitLock")
    for number in range(1, 33):
        submit_lock.objects.get_or_create(pk=number)


class Migration(migrations.Migration):
    dependencies = [
        ("batch", "0005_target_outcome_memory_limit"),
    ]

    operations = [
        # The indexes are made again under names that say what they index.
        migrations.RemoveIndex(model_name="batchjob", name="job_lease"),
        migrations.RemoveIndex(model_name="batchjob", name="job_caller_idem"),
        migrations.RenameField(model_name="batchjob", old_name="lease", new_name="last_read_at"),
        migrations.RenameField(model_name="batchjob", old_name="idem_key", new_name="content_key"),
        migrations.AddIndex(
            model_name="batchjob", index=models.Index(fields=["last_read_at"], name="job_last_read")
        ),
        migrations.AddIndex(
            model_name="batchjob",
            index=models.Index(fields=["caller", "content_key"], name="job_caller_content"),
        ),
        migrations.RemoveConstraint(model_name="submitlock", name="submitlock_id_in_token_range"),
        migrations.RunPython(delete_extra_submit_locks, create_submit_locks),
        migrations.AddConstraint(
            model_name="submitlock",
            constraint=models.CheckConstraint(condition=models.Q(("id", 1)), name="submitlock_single_row"),
        ),
    ]
