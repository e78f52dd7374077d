from django.db import migrations


def create_lock_row(apps, schema_editor):
    apps.get_model("batch", "SubmitLock").objects.get_or_create(pk=1)


class Migration(migrations.Migration):
    dependencies = [("batch", "0001_initial")]

    operations = [migrations.RunPython(create_lock_row, migrations.RunPython.noop)]
