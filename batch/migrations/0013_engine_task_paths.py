from django.db import migrations

# The job engine moved into batch/engine/ (docs/architecture.md): the schedules name its tasks by
# their new paths (0002 names them so on a new database). A drain queued under the old path when a deployment upgrades fails to import;
# the next wake-up (a minute at most) queues one under the new path.
MOVED = {
    "batch.tasks.sweep_and_evict": "batch.engine.tasks.sweep_and_evict",
    "batch.tasks.wake_stranded_work": "batch.engine.tasks.wake_stranded_work",
}


def forwards(apps, schema_editor):
    schedule = apps.get_model("django_q", "Schedule")
    for old, new in MOVED.items():
        schedule.objects.filter(func=old).update(func=new)


def backwards(apps, schema_editor):
    schedule = apps.get_model("django_q", "Schedule")
    for old, new in MOVED.items():
        schedule.objects.filter(func=new).update(func=old)


class Migration(migrations.Migration):
    dependencies = [("batch", "0012_event_streams")]

    operations = [migrations.RunPython(forwards, backwards)]
