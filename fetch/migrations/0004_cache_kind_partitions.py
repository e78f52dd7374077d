"""Rendered pages and robots.txt copies move to partitions named ``<kind>|<partition>``.

Their copies under the old names (``<partition>:rendered``, ``<partition>:robots``) are dropped:
a restricted caller named, say, ``alice:rendered`` would otherwise read them as its own pages. A
copy is fetched again when next asked for.
"""

from __future__ import annotations

from django.db import migrations
from django.db.models import Q


def drop_old_kind_partitions(apps, schema_editor):
    cached = apps.get_model("fetch", "CachedDocument")
    cached.objects.filter(Q(partition__endswith=":rendered") | Q(partition__endswith=":robots")).delete()


class Migration(migrations.Migration):
    dependencies = [("fetch", "0003_host_turn")]

    operations = [migrations.RunPython(drop_old_kind_partitions, migrations.RunPython.noop)]
