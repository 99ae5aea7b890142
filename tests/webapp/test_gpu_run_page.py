"""A GPU run's page charts generation throughput and GPU memory; a CPU run's does not."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.factories import RunFactory
from webapp.runs.models import MetricPoint, Run

pytestmark = pytest.mark.django_db


def _chart_ids(client: Client, run: Run) -> list[str]:
    content = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    charts = json.loads(re.search(r'<script id="run-charts" type="application/json">(.*?)</script>', content, re.S).group(1))
    return [c["id"] for c in charts]


def test_gpu_charts_only_on_gpu_runs() -> None:
    owner = User.objects.create_user("owner", password="pw-owner-123")
    client = Client()
    client.force_login(owner)
    gpu = RunFactory(owner=owner, name="g", config={"device": "cuda"}, model="m", max_steps=2)
    cpu = RunFactory(owner=owner, name="c", config={"device": "cpu"}, model="m", max_steps=2)
    for run in (gpu, cpu):
        MetricPoint.objects.create(run=run, step=1, key="perf/generated_tokens_per_s", value=10.0, seq=1)
    assert _chart_ids(client, gpu)[-2:] == ["throughput", "gpu-memory"]
    assert "throughput" not in _chart_ids(client, cpu)
