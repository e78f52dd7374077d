"""POST /v1/batch checks in order: empty, validation, idempotency, caps, then stores (docs/api.md)."""

from __future__ import annotations

from typing import Any

import pytest

from batch.models import BatchJob, BatchTarget, SubmitLock

from .factories import MakeCaller

URL = "https://example.org/page"


def test_submit_answers_202_with_location_and_stores_job_and_targets_before_answering(agent):
    _, client = agent
    response = client.post("/v1/batch", {"targets": [URL, {"url": URL + "2", "options": {"mode": "text"}}]})
    assert response.status_code == 202
    body = response.json()
    assert response["Location"] == f"/v1/batch/{body['id']}"
    assert body["reused"] is False
    assert body["status"] == "queued"
    assert body["targets_total"] == 2
    assert "content_key" not in body
    job = BatchJob.objects.get(pk=body["id"])
    targets = list(job.targets.order_by("idx").values_list("idx", "url", "status", "options"))
    assert targets == [(0, URL, "pending", {}), (1, URL + "2", "pending", {"mode": "text"})]


def test_empty_targets_are_refused_with_no_targets(agent):
    _, client = agent
    response = client.post("/v1/batch", {"targets": []})
    assert response.status_code == 400
    assert response.json()["code"] == "no_targets"
    assert not BatchJob.objects.exists()


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ("ftp://example.org/", "targets[1].url"),
        ("https://user:pw@example.org/", "targets[1].url"),
        ("https://example.org/" + "a" * 2050, "targets[1].url"),
        ("not a url", "targets[1].url"),
        ({"url": URL, "options": {"mode": "pdf"}}, "targets[1].options.mode"),
        ({"url": URL, "options": {"colour": "red"}}, "targets[1].options.colour"),
        ({"url": URL, "options": {"jq": ".["}}, "targets[1].options.jq"),
        ({"url": URL, "options": {"grep": "(a"}}, "targets[1].options.grep"),
        ({"url": URL, "options": {"pages": "3-1"}}, "targets[1].options.pages"),
        ({"url": URL, "options": {"pages": "one"}}, "targets[1].options.pages"),
        ({"url": URL, "options": {"context": "yes"}}, "targets[1].options.context"),
        ({"url": URL, "options": "text"}, "targets[1].options"),
        ({"url": URL, "extra": 1}, "targets[1].extra"),
        (42, "targets[1].url"),
    ],
)
def test_each_kind_of_invalid_target_is_refused_naming_index_and_field(agent, target, field):
    _, client = agent
    response = client.post("/v1/batch", {"targets": [URL, target]})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_request"
    assert body["details"][0]["index"] == 1
    assert body["details"][0]["field"] == field
    assert body["error"].startswith(field)
    assert body["hint"]
    assert not BatchJob.objects.exists()
    assert not BatchTarget.objects.exists()


def test_same_targets_again_answer_the_same_job_with_reused(agent):
    _, client = agent
    first = client.post("/v1/batch", {"targets": [URL]}).json()
    again = client.post("/v1/batch", {"targets": [URL]})
    assert again.status_code == 200
    assert again.json()["id"] == first["id"]
    assert again.json()["reused"] is True
    assert "Location" not in again
    assert BatchJob.objects.count() == 1


@pytest.mark.parametrize(
    "spelling",
    [
        [{"url": URL}],
        [{"url": URL, "options": {}}],
        [{"url": URL, "options": {"mode": "markdown", "recover": False, "context": None}}],
        [{"options": {"mode": "markdown"}, "url": "HTTPS://EXAMPLE.org/page"}],
    ],
)
def test_targets_spelled_differently_but_normalising_the_same_are_reused(agent, spelling):
    _, client = agent
    first = client.post("/v1/batch", {"targets": [URL]}).json()
    again = client.post("/v1/batch", {"targets": spelling}).json()
    assert again["id"] == first["id"]
    assert again["reused"] is True


def test_reuse_skips_the_caps(agent, settings):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 1
    _, client = agent
    first = client.post("/v1/batch", {"targets": [URL]}).json()
    assert client.post("/v1/batch", {"targets": [URL]}).json()["id"] == first["id"]
    assert client.post("/v1/batch", {"targets": [URL + "?other"]}).json()["code"] == "caller_busy"


def test_a_cancelled_twin_is_not_reused(agent):
    _, client = agent
    first = client.post("/v1/batch", {"targets": [URL]}).json()
    client.delete(f"/v1/batch/{first['id']}")
    again = client.post("/v1/batch", {"targets": [URL]})
    assert again.status_code == 202
    assert again.json()["id"] != first["id"]


def test_another_caller_with_the_same_targets_gets_its_own_job(make_caller: MakeCaller):
    _, alice = make_caller("alice")
    _, bob = make_caller("bob")
    assert (
        alice.post("/v1/batch", {"targets": [URL]}).json()["id"]
        != bob.post("/v1/batch", {"targets": [URL]}).json()["id"]
    )


def test_more_targets_than_a_job_may_hold_is_400_too_many_targets(agent, settings):
    settings.SIFT_BATCH_TARGETS_PER_JOB = 3
    _, client = agent
    response = client.post("/v1/batch", {"targets": [f"{URL}?{i}" for i in range(4)]})
    assert response.status_code == 400
    assert response.json()["code"] == "too_many_targets"
    assert not BatchJob.objects.exists()


def test_a_caller_at_its_live_job_cap_gets_429_caller_busy_with_retry_after(agent, settings):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 2
    _, client = agent
    for i in range(2):
        assert client.post("/v1/batch", {"targets": [f"{URL}?{i}"]}).status_code == 202
    response = client.post("/v1/batch", {"targets": [f"{URL}?third"]})
    assert response.status_code == 429
    body = response.json()
    assert body["code"] == "caller_busy"
    assert int(response["Retry-After"]) == body["retry_after"] > 0
    assert BatchJob.objects.count() == 2


def test_the_service_at_its_total_job_cap_answers_503_jobs_busy_with_retry_after(
    make_caller: MakeCaller, settings
):
    settings.SIFT_BATCH_JOBS_TOTAL = 2
    for name in ("a", "b"):
        assert make_caller(name)[1].post("/v1/batch", {"targets": [URL]}).status_code == 202
    response = make_caller("c")[1].post("/v1/batch", {"targets": [URL]})
    assert response.status_code == 503
    assert response.json()["code"] == "jobs_busy"
    assert int(response["Retry-After"]) > 0
    assert BatchJob.objects.count() == 2


def test_a_finished_job_does_not_hold_the_callers_cap(agent, settings):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 1
    _, client = agent
    first = client.post("/v1/batch", {"targets": [URL]}).json()
    client.delete(f"/v1/batch/{first['id']}")
    assert client.post("/v1/batch", {"targets": [URL + "?next"]}).status_code == 202


def test_caps_are_checked_after_idempotency_and_validation(agent, settings):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 1
    _, client = agent
    client.post("/v1/batch", {"targets": [URL]})
    # invalid beats busy: validation comes before caps
    assert client.post("/v1/batch", {"targets": ["ftp://x"]}).json()["code"] == "invalid_request"
    assert client.post("/v1/batch", {"targets": []}).json()["code"] == "no_targets"


@pytest.mark.parametrize("n_targets", [1, 32])
def test_submit_issues_a_bounded_number_of_queries_whatever_the_number_of_targets(
    agent, n_targets, django_assert_max_num_queries, django_capture_on_commit_callbacks
):
    _, client = agent
    # 16: auth (2), the caller's row, its twin, its live jobs, every live job, job + targets (2),
    # the total's row, every live job again, a savepoint's begin and end (2, inside the test's
    # transaction), wake the workers (2), and the sweep's look (at most once a second)
    with django_assert_max_num_queries(16), django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = client.post("/v1/batch", {"targets": [f"{URL}?{i}" for i in range(n_targets)]})
    assert response.status_code == 202
    assert len(callbacks) == 1
    assert BatchTarget.objects.count() == n_targets


def test_submitting_while_batch_is_disabled_is_503_batch_disabled(agent, settings):
    settings.SIFT_BATCH_ENABLED = False
    _, client = agent
    response = client.post("/v1/batch", {"targets": [URL]})
    assert response.status_code == 503
    assert response.json()["code"] == "batch_disabled"
    assert client.get("/v1/batch").json()["code"] == "batch_disabled"


def test_too_many_targets_is_refused_before_any_target_is_validated(agent, settings, monkeypatch):
    from fetch import targets

    settings.SIFT_BATCH_TARGETS_PER_JOB = 3

    def no_compiling(*args, **kwargs):
        raise AssertionError("compiled a program before the cheap checks")

    monkeypatch.setattr(targets, "compile_jq", no_compiling)
    monkeypatch.setattr(targets.re2, "compile", no_compiling)
    _, client = agent
    invalid = {"url": "ftp://x", "options": {"jq": ".a", "grep": "a"}}
    response = client.post("/v1/batch", {"targets": [invalid] * 4})
    assert response.json()["code"] == "too_many_targets"


@pytest.fixture
def compiled(monkeypatch) -> list[str]:
    """Every jq program validation compiles, in order."""
    from fetch import targets

    programs: list[str] = []
    real_compile = targets.compile_jq

    def counting(program: str) -> Any:
        programs.append(program)
        return real_compile(program)

    monkeypatch.setattr(targets, "compile_jq", counting)
    return programs


def test_every_target_passes_its_cheap_checks_before_any_program_is_compiled(agent, compiled):
    _, client = agent
    body = {
        "targets": [{"url": URL, "options": {"jq": ".a"}}, {"url": URL, "options": {"jq": ".b"}}, "ftp://x"]
    }
    response = client.post("/v1/batch", body)
    assert response.json()["details"][0]["field"] == "targets[2].url"
    assert compiled == []


def test_a_program_repeated_across_targets_is_compiled_once(agent, compiled):
    _, client = agent
    body = {"targets": [{"url": f"{URL}?{i}", "options": {"jq": ".items[0]"}} for i in range(20)]}
    assert client.post("/v1/batch", body).status_code == 202
    assert compiled == [".items[0]"]


def test_distinct_programs_beyond_the_submission_budget_are_refused(agent):
    from fetch.targets import MAX_JQ_CHARS, MAX_PROGRAM_CHARS_PER_SUBMISSION

    _, client = agent
    n = MAX_PROGRAM_CHARS_PER_SUBMISSION // MAX_JQ_CHARS + 1
    programs = [f".a{i} " + " " * (MAX_JQ_CHARS - 10) for i in range(n)]
    body = {"targets": [{"url": f"{URL}?{i}", "options": {"jq": p}} for i, p in enumerate(programs)]}
    response = client.post("/v1/batch", body)
    assert response.status_code == 400
    assert response.json()["details"][0]["field"] == f"targets[{n - 1}].options.jq"
    assert not BatchJob.objects.exists()


def test_more_distinct_programs_than_a_submission_may_carry_are_refused(agent):
    from fetch.targets import MAX_PROGRAMS_PER_SUBMISSION

    _, client = agent
    n = MAX_PROGRAMS_PER_SUBMISSION + 1
    body = {"targets": [{"url": f"{URL}?{i}", "options": {"grep": f"tide{i}"}} for i in range(n)]}
    response = client.post("/v1/batch", body)
    assert response.status_code == 400
    assert response.json()["details"][0]["field"] == f"targets[{n - 1}].options.grep"
    same = {"targets": [{"url": f"{URL}?{i}", "options": {"grep": "tide"}} for i in range(n)]}
    assert client.post("/v1/batch", same).status_code == 202


def test_a_grep_needing_too_much_compile_memory_is_refused(agent):
    _, client = agent
    pattern = r"[\pL\pN]{100}"  # compiles with RE2's default 8 MiB, not within sift's bound
    response = client.post("/v1/batch", {"targets": [{"url": URL, "options": {"grep": pattern}}]})
    assert response.status_code == 400
    assert response.json()["details"][0]["field"] == "targets[0].options.grep"


def test_host_names_are_stored_without_their_trailing_dot_and_reused_as_one(agent):
    _, client = agent
    first = client.post("/v1/batch", {"targets": ["https://Example.org./page"]}).json()
    assert BatchTarget.objects.get().url == URL
    assert client.post("/v1/batch", {"targets": [URL]}).json()["id"] == first["id"]


@pytest.mark.parametrize(
    "url",
    ["http://[fe80::1%25eth0]/", "http://[fe80::1%eth0]/", "https://example.org../", "https://.example.org/"],
)
def test_zone_ids_and_empty_host_labels_are_400_naming_the_url(agent, url):
    _, client = agent
    response = client.post("/v1/batch", {"targets": [url]})
    assert response.status_code == 400
    assert response.json()["details"][0]["field"] == "targets[0].url"
    assert not BatchJob.objects.exists()


def test_a_stored_target_is_rebuilt_without_compiling_its_programs(monkeypatch):
    from fetch import targets

    def no_compiling(*args, **kwargs):
        raise AssertionError("recompiled a validated target")

    monkeypatch.setattr(targets, "compile_jq", no_compiling)
    monkeypatch.setattr(targets.re2, "compile", no_compiling)
    stored = {"mode": "text", "grep": "tide", "jq": ".a", "pages": "1-2", "recover": True}

    target = targets.Target.from_stored(URL, stored)

    assert target.to_dict() == {"url": URL, "options": stored}
    assert target.options.page_ranges == ((1, 2),)


def test_a_refusal_and_a_reuse_take_a_few_queries_and_never_the_submit_lock(
    agent, settings, django_assert_max_num_queries
):
    settings.SIFT_BATCH_JOBS_PER_CALLER = 1
    _, client = agent
    client.post("/v1/batch", {"targets": [URL]})
    # auth (1, the key's use was noted by the first submit), a savepoint's begin, rollback and
    # release (3, inside the test's transaction), the caller's row, its twin, its live jobs
    with django_assert_max_num_queries(7) as refused:
        assert client.post("/v1/batch", {"targets": [URL + "?other"]}).status_code == 429
    # auth, a savepoint's begin and release (2), the caller's row, the twin read and touched (2)
    with django_assert_max_num_queries(6) as reused:
        assert client.post("/v1/batch", {"targets": [URL]}).status_code == 200
    sql = " ".join(q["sql"] for q in [*refused.captured_queries, *reused.captured_queries])
    assert SubmitLock._meta.db_table not in sql
