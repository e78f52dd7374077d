from __future__ import annotations

from django.contrib import admin
from django.urls import path

from batch.api import api
from batch.views import healthz, metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("v1/", api.urls),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
]

handler404 = "batch.views.not_found"
handler500 = "batch.views.server_error"
