"""The Prometheus alerting rules (deploy/prometheus/sift-alerts.yml): valid, each fired and held
back by promtool's unit tests, each with a summary, a description and a runbook in
docs/operations.md. Under CI=true a missing promtool fails these tests rather than skipping them
(``.ci/run`` installs Debian's ``prometheus`` package)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "deploy" / "prometheus" / "sift-alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "sift-alerts.test.yml"
OPERATIONS = ROOT / "docs" / "operations.md"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but promtool is missing: apt-get install -y prometheus")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return found


def alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_finds_the_rules_valid():
    done = subprocess.run(
        [promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in done.stdout


def test_promtools_unit_tests_of_the_rules_pass():
    done = subprocess.run(
        [promtool(), "test", "rules", RULE_TESTS.name],
        cwd=RULE_TESTS.parent,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_is_tested_firing_and_silent():
    checks = [
        check for test in yaml.safe_load(RULE_TESTS.read_text())["tests"] for check in test["alert_rule_test"]
    ]
    for alert in alerts():
        name = alert["alert"]
        mine = [check for check in checks if check["alertname"] == name]
        assert any(check.get("exp_alerts") for check in mine), f"no test fires {name}"
        assert any(not check.get("exp_alerts") for check in mine), f"no test holds {name} back"


def test_every_alert_says_what_is_wrong_and_links_its_runbook_in_the_operations_guide():
    headings = set(re.findall(r"^### (\w+)$", OPERATIONS.read_text(), flags=re.MULTILINE))
    for alert in alerts():
        name, notes = alert["alert"], alert["annotations"]
        assert notes["summary"].strip(), name
        assert notes["description"].strip(), name
        assert notes["runbook_url"] == f"docs/operations.md#{name.lower()}", name
        assert name in headings, f"docs/operations.md has no '### {name}' runbook"
        assert alert["labels"]["severity"] in ("page", "warning"), name
