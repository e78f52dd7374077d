from django.db import migrations

SCHEDULES = [
    # Sweep and evict on a schedule, besides on every submit and stored result.
    ("sift: sweep and evict", "batch.engine.tasks.sweep_and_evict", 5),
    # A safety net (batch/engine/wakeups.py): drains are queued on every submit and when a worker process
    # starts; this one queues them for work stranded any other way, such as a lost task.
    ("sift: wake stranded work", "batch.engine.tasks.wake_stranded_work", 1),
]


def create_rows(apps, schema_editor):
    # The single row every submit locks to serialise SIFT_BATCH_JOBS_TOTAL (docs/decisions.md).
    apps.get_model("batch", "SubmitLock").objects.get_or_create(pk=1)
    # The two places a target can be fetched in; at most WORKERS of them are used (docs/workers.md).
    for number in (0, 1):
        apps.get_model("batch", "WorkerSlot").objects.get_or_create(number=number)
    schedule = apps.get_model("django_q", "Schedule")
    for name, func, minutes in SCHEDULES:
        schedule.objects.update_or_create(
            name=name, defaults={"func": func, "schedule_type": "I", "minutes": minutes, "repeats": -1}
        )


def delete_schedules(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name__in=[s[0] for s in SCHEDULES]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("batch", "0001_initial"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(create_rows, delete_schedules)]
