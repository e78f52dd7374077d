"""What a worker stores is cleaned, and a store that fails anyway still ends the target.

A FetchFunc here plays a hostile jq program or a buggy fetch side: results with NUL, lone
surrogates, NaN, sets and bytes, errors of 10 MB. On SQLite and PostgreSQL each target ends
(done with cleaned data, or failed ``internal``), its slot is free right after, and the next
target runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from batch import jobs
from batch.engine import storable, worker
from batch.models import BatchJob, BatchTarget, WorkerSlot
from doors.validation import validate_targets
from fetch.outcomes import Outcome
from fetch.targets import Target

BASE = "https://upstream.test/"
TEN_MB = "e" * (10 * 2**20)


@pytest.fixture(autouse=True)
def one_worker_and_a_long_lease(settings):
    # A slot not freed at once would stay taken for an hour: the next claim would find none.
    settings.SIFT_BATCH_WORKERS = 1
    settings.SIFT_BATCH_CLAIM_LEASE = 3600
    settings.SIFT_BATCH_JOBS_PER_CALLER = 10


Behaviour = Callable[[], Any]


def _hostile(behaviours: dict[str, Behaviour]) -> worker.FetchFunc:
    def fetch(caller: worker.Caller, target: Target) -> worker.Result:
        return behaviours[target.url]()

    return fetch


def _run_one_then_the_next(caller, behaviour: Behaviour) -> tuple[BatchTarget, BatchTarget]:
    """Run a hostile target, check its slot is free at once, then run a plain target after it."""
    job = jobs.submit(caller, validate_targets([BASE + "hostile", BASE + "next"])).job
    fetch = _hostile({BASE + "hostile": behaviour, BASE + "next": lambda: {"content": "fine", "meta": {}}})
    first = worker.claim_next_target()
    assert first is not None
    assert first.idx == 0
    worker.run_claim(first, fetch)
    assert list(WorkerSlot.objects.filter(target__isnull=False)) == []
    second = worker.claim_next_target()
    assert second is not None
    assert second.idx == 1
    worker.run_claim(second, fetch)
    hostile, after = job.targets.order_by("idx")
    assert (after.status, after.result) == ("done", {"content": "fine", "meta": {}})
    job.refresh_from_db()
    assert job.targets_done == 2
    assert not job.is_live
    return hostile, after


def _raise(exc: Exception) -> Behaviour:
    def behave() -> Any:
        raise exc

    return behave


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def _cycle() -> dict[str, Any]:
    looped: dict[str, Any] = {"name": "loop"}
    looped["self"] = looped
    return looped


def test_nul_and_lone_surrogates_in_content_and_meta_are_cleaned_not_refused(agent):
    caller, _ = agent
    result = {
        "content": "a\x00b\ud800c\udfffd 😀",
        "meta": {"ti\x00tle\udc80": ["x\x00", {"deep\ud83d": "y\udead"}], "ok": "plain"},
    }
    hostile, _ = _run_one_then_the_next(caller, lambda: result)
    assert hostile.status == "done"
    assert hostile.result == {
        "content": "ab\ufffdc\ufffdd 😀",
        "meta": {"title\ufffd": ["x", {"deep\ufffd": "y\ufffd"}], "ok": "plain"},
    }
    assert hostile.n_bytes == storable.json_bytes(hostile.result)


def test_values_json_cannot_hold_become_plain_json(agent):
    caller, _ = agent
    meta = {
        "set": {3},
        "tuple": (1, "two"),
        "bytes": b"caf\xc3\xa9 \xff\x00",
        "nan": math.nan,
        "inf": -math.inf,
        "huge": 10**400,
        "big": 2**70,
        "cycle": _cycle(),
        "object": Unprintable(),
        7: "int key",
        None: "none key",
    }
    hostile, _ = _run_one_then_the_next(caller, lambda: {"content": "c", "meta": meta})
    assert hostile.status == "done"
    stored = hostile.result["meta"]
    assert stored["set"] == [3]
    assert stored["tuple"] == [1, "two"]
    assert stored["bytes"] == "café \ufffd"
    assert (stored["nan"], stored["inf"], stored["huge"]) == (None, None, None)
    assert stored["big"] == pytest.approx(2**70)  # a float; jsonb may read it back as an int
    assert stored["cycle"] == {"name": "loop", "self": None}
    assert stored["object"] == "<Unprintable>"
    assert (stored["7"], stored["null"]) == ("int key", "none key")


def test_a_ten_megabyte_error_and_hint_are_cut_and_the_target_fails_with_its_outcome(agent):
    caller, _ = agent
    hostile, _ = _run_one_then_the_next(
        caller, _raise(worker.TargetFailed(Outcome.TIMEOUT, TEN_MB + "\x00", "\ud800" + TEN_MB))
    )
    assert (hostile.status, hostile.outcome) == ("failed", "timeout")
    assert len(hostile.error) == storable.ERROR_MAX_CHARS
    assert hostile.error.endswith(storable.CUT_MARK)
    assert len(hostile.hint) == storable.HINT_MAX_CHARS
    assert hostile.hint.startswith("\ufffd")


def test_an_outcome_outside_the_table_is_stored_as_internal(agent):
    caller, _ = agent
    odd = worker.TargetFailed("x" * 100, "odd", "odd hint")  # type: ignore[arg-type]  # hostile on purpose
    hostile, _ = _run_one_then_the_next(caller, _raise(odd))
    assert (hostile.status, hostile.outcome, hostile.error) == ("failed", "internal", "odd")


@pytest.mark.parametrize(
    "result",
    [["not", "a", "mapping"], "just text", None, 42],
    ids=["list", "str", "none", "int"],
)
def test_a_result_that_is_not_a_mapping_ends_the_target_internal(agent, result):
    caller, _ = agent
    hostile, _ = _run_one_then_the_next(caller, lambda: result)
    assert (hostile.status, hostile.outcome, hostile.result) == ("failed", "internal", None)
    assert hostile.error == "internal error"


def test_a_result_over_the_byte_budget_fails_too_long_instead_of_being_stored(agent, settings):
    settings.SIFT_BATCH_MAX_BYTES = 10_000
    caller, _ = agent
    hostile, after = _run_one_then_the_next(caller, lambda: {"content": "x" * 20_000, "meta": {}})
    assert (hostile.status, hostile.outcome, hostile.result, hostile.n_bytes) == (
        "failed",
        "too_long",
        None,
        0,
    )
    assert BatchJob.objects.get(pk=hostile.job_id).n_bytes == after.n_bytes


def test_a_drain_runs_every_hostile_target_to_its_end_and_goes_on(agent):
    caller, _ = agent
    behaviours: dict[str, Behaviour] = {
        BASE + "nul": lambda: {"content": "\x00", "meta": {"k\x00": "\ud800"}},
        BASE + "set": lambda: {"content": "s", "meta": {"tags": {"a"}, "raw": b"\x00"}},
        BASE + "list": lambda: ["not", "a", "mapping"],
        BASE + "huge-error": _raise(worker.TargetFailed(Outcome.BLOCKED, TEN_MB, TEN_MB)),
        BASE + "nan": lambda: {"content": "n", "meta": {"score": math.nan}},
        BASE + "plain": lambda: {"content": "plain", "meta": {}},
    }
    job = jobs.submit(caller, validate_targets(list(behaviours))).job
    assert worker.drain(_hostile(behaviours), budget=20) == len(behaviours)
    ends = list(job.targets.order_by("idx").values_list("status", "outcome"))
    assert ends == [
        ("done", None),
        ("done", None),
        ("failed", "internal"),
        ("failed", "blocked"),
        ("done", None),
        ("done", None),
    ]
    job.refresh_from_db()
    assert (job.status, job.targets_done, job.targets_failed) == ("partial", 6, 2)
    assert list(WorkerSlot.objects.filter(target__isnull=False)) == []


@pytest.mark.parametrize(
    "wait", [math.inf, math.nan, 1e300, -5.0, 10**400], ids=["inf", "nan", "1e300", "neg", "huge"]
)
def test_a_busy_answer_asking_for_an_absurd_wait_retries_within_retry_for(agent, settings, wait):
    settings.SIFT_BATCH_RETRY_WAIT = 2
    settings.SIFT_BATCH_RETRY_FOR = 600
    caller, _ = agent
    job = jobs.submit(caller, validate_targets([BASE + "busy"])).job
    claim = worker.claim_next_target()
    assert claim is not None
    before = timezone.now()
    worker.run_claim(claim, _hostile({BASE + "busy": _raise(worker.RetryLater("busy", wait=wait))}))
    assert list(WorkerSlot.objects.filter(target__isnull=False)) == []
    target = job.targets.get()
    assert target.status == "pending"
    assert before + timedelta(seconds=2) <= target.not_before <= timezone.now() + timedelta(seconds=600)


# --- a store that fails anyway --------------------------------------------------------------


def _refuse_stores_where(condition: str) -> None:
    """A real database error on the target's UPDATE: a trigger that raises when ``condition`` holds."""
    table = BatchTarget._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION sift_test_refuse() RETURNS trigger AS $$ BEGIN "
                f"IF {condition} THEN RAISE EXCEPTION 'refused by test trigger'; END IF; "
                "RETURN NEW; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                f"CREATE TRIGGER sift_test_refuse BEFORE UPDATE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION sift_test_refuse()"
            )
        else:
            cursor.execute(
                f"CREATE TRIGGER sift_test_refuse BEFORE UPDATE ON {table} WHEN {condition} "
                "BEGIN SELECT RAISE(ABORT, 'refused by test trigger'); END"
            )


def test_a_store_the_database_refuses_ends_the_target_internal_and_frees_the_slot(agent, caplog):
    _refuse_stores_where("NEW.status = 'done' AND NEW.url LIKE '%hostile%'")
    caller, _ = agent
    hostile, _ = _run_one_then_the_next(caller, lambda: {"content": "refused", "meta": {}})
    assert (hostile.status, hostile.outcome, hostile.result) == ("failed", "internal", None)
    assert (hostile.error, hostile.hint) == (
        worker.INTERNAL_FAILURE.error,
        worker.INTERNAL_FAILURE.hint,
    )
    assert "storing its end failed" in caplog.text


def test_when_even_the_internal_store_fails_the_slot_is_freed_and_the_lease_returns_the_target(agent):
    _refuse_stores_where("NEW.status IN ('done', 'failed') AND NEW.url LIKE '%hostile%'")
    caller, _ = agent
    job = jobs.submit(caller, validate_targets([BASE + "hostile"])).job
    claim = worker.claim_next_target()
    assert claim is not None
    worker.run_claim(claim, _hostile({BASE + "hostile": lambda: {"content": "c", "meta": {}}}))
    assert list(WorkerSlot.objects.filter(target__isnull=False)) == []
    target = job.targets.get()
    assert (target.status, target.attempts) == ("running", 1)
    assert target.lease_until is not None


# --- any value at all -----------------------------------------------------------------------

_text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=20) | st.sampled_from(
    ["\x00", "\ud800", "\udfff", "a\x00\udc00b"]
)
_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | _text
    | st.binary(max_size=20)
    | st.sets(st.integers())
)
_values = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(_text | st.integers() | st.none(), inner, max_size=4)
        | st.tuples(inner, inner)
    ),
    max_leaves=30,
)


@pytest.mark.django_db
@hypothesis_settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=_text, meta=_values)
def test_any_result_is_stored_as_clean_json_on_this_database(agent, content, meta):
    cleaned = storable.storable_result({"content": content, "meta": meta})
    text = json.dumps(cleaned, ensure_ascii=False, allow_nan=False)
    assert "\x00" not in text
    assert not any("\ud800" <= ch <= "\udfff" for ch in text)
    caller, _ = agent
    job = jobs.submit(caller, validate_targets([BASE + "any"])).job
    BatchTarget.objects.filter(job=job).update(status="done", result=cleaned)
    # Numbers may come back in another type (jsonb keeps decimals); every string comes back as is.
    assert _strings(BatchTarget.objects.get(job=job).result) == _strings(json.loads(text))
    BatchJob.objects.filter(pk=job.pk).delete()


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return sorted([*value, *(s for v in value.values() for s in _strings(v))])
    if isinstance(value, list):
        return sorted(s for v in value for s in _strings(v))
    return [value] if isinstance(value, str) else []
