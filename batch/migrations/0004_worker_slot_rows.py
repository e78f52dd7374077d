from django.db import migrations


def create_slots(apps, schema_editor):
    slot = apps.get_model("batch", "WorkerSlot")
    for number in (0, 1):
        slot.objects.get_or_create(number=number)


class Migration(migrations.Migration):
    dependencies = [("batch", "0003_worker_slots")]

    operations = [migrations.RunPython(create_slots, migrations.RunPython.noop)]
