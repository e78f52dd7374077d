from __future__ import annotations

from django.contrib import admin
from django.urls import path

from doors.rest import api
from doors.views import healthz, metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("v1/", api.urls),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
]

handler404 = "doors.views.not_found"
handler500 = "doors.views.server_error"
