"""``SIFT_FETCH_HOST_INTERVAL``: requests to one host spaced deployment-wide (docs/politeness.md).

Sites on loopback record when each request arrived; a batch runs through a real qcluster with
two workers, /v1/fetch in this process.
"""

from __future__ import annotations

import itertools
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from batch import jobs
from batch.engine import worker
from batch.models import BatchJob
from doors.validation import validate_targets
from fetch.models import HostTurn
from fetch.politeness import host_turns

from .deployment import Deployment, wait_for
from .factories import LOOPBACK, scripted_job
from .sites import Answer, site

INTERVAL = 0.5


@pytest.fixture
def open_loopback(settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_CACHE_TTL = 900


def _gaps(times: list[float]) -> list[float]:
    return [later - earlier for earlier, later in itertools.pairwise(times)]


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_a_batch_spaces_one_hosts_targets_without_slowing_another_host(tmp_path, agent):
    caller, _ = agent
    paths = [f"/page/{n}" for n in range(4)]
    with site("127.0.0.1", {p: Answer() for p in paths}) as busy, site("127.0.0.3", {"/": Answer()}) as quiet:
        deployment = Deployment(
            tmp_path,
            {
                "SIFT_TEST_FETCH_FUNC": "",
                "SIFT_FETCH_ALLOW_CIDRS": "127.0.0.0/8",
                "SIFT_BATCH_WORKERS": "2",
                "SIFT_FETCH_HOST_INTERVAL": f"{INTERVAL}s",
                # Shorter than the last target's wait for its turn: turns must not use it up.
                "SIFT_BATCH_RETRY_FOR": "1s",
            },
        )
        deployment.start_cluster()
        try:
            # The other host's target comes last, so it is not served first merely by its place.
            targets: list[object] = [*(busy.url(p) for p in paths), quiet.url("/")]
            job = jobs.submit(caller, validate_targets(targets)).job
            wait_for(
                lambda: not BatchJob.objects.get(pk=job.pk).is_live, timeout=60, what="the job to finish"
            )
        finally:
            deployment.stop_all()
        arrivals = busy.pages()
    job.refresh_from_db()
    assert (job.status, job.targets_done, job.targets_failed) == ("done", 5, 0)
    assert len(arrivals) == 4
    assert all(gap >= INTERVAL for gap in _gaps(arrivals)), _gaps(arrivals)
    assert arrivals[-1] - arrivals[0] < 30 * INTERVAL  # spaced, not stalled
    *spaced, other = job.targets.order_by("idx")
    assert other.finished_at < max(t.finished_at for t in spaced)
    assert all(t.busy_since is None for t in job.targets.all())  # turns never counted as busy


def _not_due(caller: worker.Caller, target: object) -> worker.Result:
    raise worker.RetryLater("the host's turn is 0.3 s away", wait=0.3, host_turn=True)


def test_a_target_waiting_for_its_hosts_turn_is_pending_until_then_and_never_busy(agent, settings):
    caller, _ = agent
    settings.SIFT_BATCH_RETRY_WAIT = 5.0
    settings.SIFT_BATCH_RETRY_FOR = 0.0  # any busy retry would give up at once
    job = scripted_job(caller, "a=1")
    for attempt in (1, 2, 3):
        claim = worker.claim_next_target(timezone.now() + timedelta(seconds=attempt))
        assert claim is not None
        before = timezone.now()
        worker.run_claim(claim, _not_due)
        after = timezone.now()
        target = job.targets.get()
        assert (target.status, target.outcome, target.busy_since) == ("pending", None, None)
        # Exactly the turn's distance: neither RETRY_WAIT's minimum nor RETRY_FOR's end applies.
        turn = timedelta(seconds=0.3)
        assert target.not_before is not None
        assert before + turn <= target.not_before <= after + turn


def test_a_fetch_waits_for_its_hosts_turn_then_answers(agent, open_loopback, settings):
    _, client = agent
    settings.SIFT_FETCH_HOST_INTERVAL = 1.0
    with site(routes={"/a": Answer(), "/b": Answer()}) as upstream:
        first = client.get("/v1/fetch", url=upstream.url("/a"))
        second = client.get("/v1/fetch", url=upstream.url("/b"))
        arrivals = upstream.pages()
    assert (first.status_code, second.status_code) == (200, 200), second.content
    assert _gaps(arrivals)[0] >= 1.0
    assert HostTurn.objects.filter(host="127.0.0.1").exists()


def test_a_fetch_whose_turn_would_pass_the_deadline_answers_busy_at_once(agent, open_loopback, settings):
    _, client = agent
    settings.SIFT_FETCH_HOST_INTERVAL = 60.0
    settings.SIFT_FETCH_TIMEOUT = 10.0
    with site(routes={"/a": Answer(), "/b": Answer()}) as upstream:
        assert client.get("/v1/fetch", url=upstream.url("/a")).status_code == 200
        refused = client.get("/v1/fetch", url=upstream.url("/b"))
        assert upstream.count("/b") == 0
    assert refused.status_code == 429, refused.content
    body = refused.json()
    assert body["code"] == "busy"
    assert 50 <= int(refused["Retry-After"]) <= 60
    assert body["retry_after"] == int(refused["Retry-After"])
    assert "batch" in body["hint"]


def test_a_cached_page_needs_no_turn(agent, open_loopback, settings):
    _, client = agent
    settings.SIFT_FETCH_HOST_INTERVAL = 60.0
    with site(routes={"/a": Answer()}) as upstream:
        assert client.get("/v1/fetch", url=upstream.url("/a")).status_code == 200
        again = client.get("/v1/fetch", url=upstream.url("/a"))
    assert again.status_code == 200
    assert again.json()["cached"] is True


def test_other_hosts_and_ports_share_nothing_but_the_host_name(agent, open_loopback, settings):
    _, client = agent
    settings.SIFT_FETCH_HOST_INTERVAL = 60.0
    with site("127.0.0.1") as one, site("127.0.0.1") as same_host, site("127.0.0.3") as other:
        for served in (one, same_host, other):
            served.routes["/"] = Answer()
        assert client.get("/v1/fetch", url=one.url("/")).status_code == 200
        assert client.get("/v1/fetch", url=other.url("/")).status_code == 200
        assert client.get("/v1/fetch", url=same_host.url("/")).status_code == 429


def test_with_the_interval_off_no_turn_is_kept(agent, open_loopback, settings):
    _, client = agent
    settings.SIFT_FETCH_HOST_INTERVAL = 0
    with site(routes={"/a": Answer(), "/b": Answer()}) as upstream:
        assert client.get("/v1/fetch", url=upstream.url("/a")).status_code == 200
        assert client.get("/v1/fetch", url=upstream.url("/b")).status_code == 200
    assert not HostTurn.objects.exists()


def test_a_turn_is_not_due_before_the_last_request_ended_plus_the_interval(db, settings):
    settings.SIFT_FETCH_HOST_INTERVAL = 30.0
    with host_turns.turn("http://example.org/a", since=None, wait=False):
        pass
    with (
        pytest.raises(host_turns.HostNotDue) as not_due,
        host_turns.turn("http://example.org/b", since=None, wait=False),
    ):
        pass
    assert 29 < (not_due.value.retry_after or 0) <= 30
    assert not_due.value.outcome == "busy"


def test_turns_long_past_are_forgotten_when_a_new_host_comes(db):
    long_ago = timezone.now() - timedelta(hours=2)
    HostTurn.objects.create(host="old.example", next_at=long_ago)
    HostTurn.objects.create(host="recent.example", next_at=timezone.now())
    assert host_turns.take_turn("new.example", 1.0) == 0.0
    assert set(HostTurn.objects.values_list("host", flat=True)) == {"recent.example", "new.example"}


@pytest.mark.django_db(transaction=True)
def test_of_many_processes_asking_at_once_one_gets_the_turn(db):
    answers: list[float] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def ask() -> None:
        try:
            barrier.wait()
            answers.append(host_turns.take_turn("example.org", 30.0))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(answers)[0] == 0.0
    # Each loser counts from its own clock reading, taken a moment before or after the winner's.
    assert all(29 < answer < 31 for answer in sorted(answers)[1:]), answers


def test_a_crawl_delay_holds_back_only_the_robots_requests_that_read_it(make_caller, open_loopback, settings):
    """A ``robots: true`` fetch whose site asks a Crawl-delay of 20 s spaces the next ``robots:
    true`` request by it; a caller without ``robots`` waits only the host's interval."""
    settings.SIFT_FETCH_HOST_INTERVAL = INTERVAL
    settings.SIFT_FETCH_TIMEOUT = 10.0  # a turn 20 s away is past the first half: busy at once
    _, polite = make_caller("polite")
    _, plain = make_caller("plain")
    robots_txt = Answer(200, b"User-agent: *\nCrawl-delay: 20\n", "text/plain")
    routes = {"/robots.txt": robots_txt, "/a": Answer(), "/b": Answer(), "/c": Answer()}
    with site(routes=routes) as upstream:
        first = polite.post("/v1/fetch", {"url": upstream.url("/a"), "options": {"robots": True}})
        other = plain.get("/v1/fetch", url=upstream.url("/b"))
        again = polite.post("/v1/fetch", {"url": upstream.url("/c"), "options": {"robots": True}})
        arrivals = upstream.pages()
    assert first.status_code == 200, first.content
    assert other.status_code == 200, other.content
    assert INTERVAL <= _gaps(arrivals)[0] < 10  # the interval, not the crawl delay
    assert again.status_code == 429, again.content
    assert 15 <= again.json()["retry_after"] <= 20
    assert upstream.count("/c") == 0


def test_a_crawl_delay_turn_not_used_is_given_back(db, settings):
    """A ``robots: true`` request whose host turn is not due takes no crawl-delay turn with it."""
    settings.SIFT_FETCH_HOST_INTERVAL = 60.0
    url = "http://127.0.0.1/"
    with host_turns.turn(url, since=None, wait=False):
        pass
    with pytest.raises(host_turns.HostNotDue), host_turns.turn(url, since=None, wait=False, least=120.0):
        pass
    key = host_turns.crawl_delay_key("127.0.0.1")
    assert HostTurn.objects.get(host=key).next_at <= timezone.now()
    assert host_turns.crawl_delay_key("a" * 300).startswith("robots sha256:")
