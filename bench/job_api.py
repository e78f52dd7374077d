"""Benchmark: what one user waits for a stored submit and a job read, empty and beside 640,000 targets.

    .venv/bin/python -m bench.job_api [--requests 200] [--content-chars 3000] [--guard-seconds 10]
                                      [--no-guard] [--reseed]

On the local PostgreSQL, in two states, each through gunicorn started with the Procfile's ``web``
line and no cluster:

- ``empty``: ``sift_bench_api``, recreated and migrated, dropped at the end;
- ``640k``: ``sift_bench_api_640k``, holding 20,000 finished jobs of 32 targets (640,000 target
  rows, small results) of 400 callers (50 each, within ``SIFT_BATCH_FINISHED_PER_CALLER``). It is
  seeded once, in one transaction, by copying a template job with ``INSERT ... SELECT`` over
  ``generate_series``, and kept for the next run (``--reseed`` builds it again); its jobs' leases
  are renewed when they are an hour old, so that no sweep removes them during a run.

In each state a child process (this module with ``--prepare``) migrates, issues two callers
(deleting an earlier run's, with their jobs): the submitter, and the reader, whose job is the one
read: 32 targets submitted through ``jobs.submit`` and finished with ``--content-chars``
characters of text each and an envelope's meta, as a worker stores them. (The submitter's own
finished jobs would not do: past ``SIFT_BATCH_FINISHED_PER_CALLER`` cancelled jobs, its oldest is
evicted.) Both states' servers run at once, and ONE client per state, on one keep-alive
connection, after 20 unmeasured rounds, does ``--requests`` rounds, the two states taking turns
round by round (so that other load on the machine hits both alike):

1. ``POST /v1/batch`` with 32 new URLs (under ``.invalid``, never fetched) as the submitter:
   timed, must be 202 (stored, neither reused nor refused);
2. ``GET /v1/batch/{id}`` of the reader's finished job, with its content, as the reader: timed,
   must be 200 with its 32 targets;
3. ``DELETE /v1/batch/{id}`` of the job just submitted, untimed, so that the submitter's one live
   job (the default caps) allows the next submit.

A time runs from sending the request to the answer's last byte. The guard follows, on
``sift_bench``: ``bench.submit``'s ``GET /healthz`` and ``POST /v1/batch (202)`` rows (16 clients,
4 targets a job, caps raised), and the ratio of their throughputs. No traffic leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import harness, submit
from bench.batch_latency import Client, load_average
from bench.cpu import BUSY_MACHINE_CORES, CpuSnapshot, bench_processes, cores_by_group, process_cores
from bench.harness import REPO
from bench.postgres import BenchDatabase, execute, server_settings
from bench.stats import percentile

if TYPE_CHECKING:
    from batch.models import ApiKey, BatchJob

MODULE = "bench.job_api"
STATES = ("empty", "640k")
EMPTY = BenchDatabase("sift_bench_api")
SEEDED = BenchDatabase("sift_bench_api_640k")
SUBMITTER_NAME = "bench-api-submitter"
READER_NAME = "bench-api-reader"
SEED_CALLER_PREFIX = "bench-seed-"
SEED_CALLERS = 400
SEED_JOBS = 20_000
TARGETS_PER_JOB = 32
SEED_CONTENT_CHARS = 64
# 640,000 small results are over the default 64 MiB budget; a deployment storing them has raised it.
MAX_BYTES = "1GiB"
LEASE_RENEWAL = timedelta(hours=1)
WARMUP_ROUNDS = 20
AIM_MS = 15.0
GUARD_AIM = 0.15
GUARD_CLIENTS = 16

# When a job was last read: the seeding sets it, and renews it before a run.
LEASE_FIELD = "last_read_at"
# The job's fields a seeded copy sets itself (SQL over the copy's number ``n``, and the run's
# ``now`` as a parameter); every other field is copied from the template job as it is.
JOB_COPY_FIELDS = {
    "id": "md5('seed-' || n)",
    "caller": "(%(callers)s::bigint[])[1 + mod(n, %(n_callers)s)]",
    "created_at": "%(now)s::timestamptz - make_interval(secs => n)",
    "finished_at": "%(now)s::timestamptz - make_interval(secs => n) + interval '5 seconds'",
    LEASE_FIELD: "%(now)s::timestamptz",
    "content_key": "md5('key-' || n) || md5('key2-' || n)",
}
TARGET_COPY_FIELDS = {"job": JOB_COPY_FIELDS["id"], "url": "t.url || '?copy=' || n"}


# --- the prepared database (the --prepare child, with Django) --------------------------------


def text_of(idx: int, chars: int) -> str:
    words = f"Paragraph text of target {idx}, as an extracted article would read. "
    return (words * (chars // len(words) + 1))[:chars]


def finish_job(job: BatchJob, content_chars: int) -> None:
    """Store a result for every target and settle the job ``done``, as the worker would."""
    from django.db import transaction
    from django.utils import timezone

    from batch.engine.storable import json_bytes
    from batch.models import BatchJob, BatchTarget, JobStatus, TargetStatus

    now = timezone.now()
    total = 0
    with transaction.atomic():
        for target in job.targets.all():
            content = text_of(target.idx, content_chars)
            meta = {"url": target.url, "final_url": target.url, "status": 200, "content_type": "text/html"}
            result = {
                "content": content,
                "meta": {**meta, "chars": len(content), "title": f"Page {target.idx}"},
            }
            n_bytes = json_bytes(result)
            total += n_bytes
            BatchTarget.objects.filter(pk=target.pk).update(
                status=TargetStatus.DONE,
                result=result,
                n_bytes=n_bytes,
                attempts=1,
                started_at=now,
                finished_at=now,
            )
        BatchJob.objects.filter(pk=job.pk).update(
            status=JobStatus.DONE,
            targets_done=job.targets_total,
            n_bytes=total,
            served_at=now,
            finished_at=now,
        )


def stored_job(caller: ApiKey, tag: str, content_chars: int) -> BatchJob:
    """A finished job of ``TARGETS_PER_JOB`` targets, submitted as the API submits it."""
    from batch import jobs
    from doors.validation import validate_targets

    urls: list[object] = [f"https://{tag}.bench.invalid/{i}" for i in range(TARGETS_PER_JOB)]
    job = jobs.submit(caller, validate_targets(urls)).job
    finish_job(job, content_chars)
    return job


def copy_statement(model: Any, overrides: dict[str, str], where: str) -> str:
    """``INSERT ... SELECT`` copying the template's rows once per ``n``, ``overrides`` set per copy."""
    from django.db import connection

    q = connection.ops.quote_name
    fields = [f for f in model._meta.concrete_fields if not (f.primary_key and f.name not in overrides)]
    missing = set(overrides) - {f.name for f in fields}
    if missing:
        raise RuntimeError(f"{model.__name__} has no field {sorted(missing)}: update the copy's fields")
    columns = ", ".join(q(f.column) for f in fields)
    values = ", ".join(overrides.get(f.name, f"t.{q(f.column)}") for f in fields)
    table = q(model._meta.db_table)
    return (
        f"INSERT INTO {table} ({columns}) SELECT {values} FROM {table} t, "  # names from the model
        f"generate_series(1, %(jobs)s) AS n WHERE {where}"
    )


def seed(content_chars: int, jobs: int = SEED_JOBS, n_callers: int = SEED_CALLERS) -> None:
    """``jobs`` finished jobs of ``n_callers`` callers, copied from one template, in one transaction."""
    from django.db import connection, transaction
    from django.utils import timezone

    from batch.models import ApiKey, BatchJob, BatchTarget

    q = connection.ops.quote_name
    with transaction.atomic():
        callers = [ApiKey.issue(f"{SEED_CALLER_PREFIX}{i}")[0] for i in range(n_callers)]
        template = stored_job(callers[0], "template", content_chars)
        params: dict[str, Any] = {
            "callers": [c.pk for c in callers],
            "n_callers": len(callers),
            "now": timezone.now(),
            "jobs": jobs,
            "template": template.pk,
        }
        with connection.cursor() as cursor:
            where_job = f"t.{q(str(BatchJob._meta.get_field('id').column))} = %(template)s"
            cursor.execute(copy_statement(BatchJob, JOB_COPY_FIELDS, where_job), params)
            job_column = str(BatchTarget._meta.get_field("job").column)
            where_target = f"t.{q(job_column)} = %(template)s"
            cursor.execute(copy_statement(BatchTarget, TARGET_COPY_FIELDS, where_target), params)
        template.delete()


def seeded_counts() -> tuple[int, int]:
    from batch.models import BatchJob, BatchTarget

    seeded = {"caller__name__startswith": SEED_CALLER_PREFIX}
    jobs = BatchJob.objects.filter(**seeded).count()
    targets = BatchTarget.objects.filter(**{f"job__{k}": v for k, v in seeded.items()}).count()
    return jobs, targets


def renew_seeded_leases() -> int:
    """Renew the seeded jobs' leases once they are ``LEASE_RENEWAL`` old: no sweep may take them."""
    from django.utils import timezone

    from batch.models import BatchJob

    now = timezone.now()
    stale = BatchJob.objects.filter(
        caller__name__startswith=SEED_CALLER_PREFIX, **{f"{LEASE_FIELD}__lt": now - LEASE_RENEWAL}
    )
    return stale.update(**{LEASE_FIELD: now})


def prepare(state: str, content_chars: int) -> dict[str, Any]:
    """Migrate, make the state, issue the submitter and the reader, and store the reader's job."""
    from django.core.management import call_command
    from django_q.models import OrmQ

    from batch.models import ApiKey

    call_command("migrate", verbosity=0, interactive=False)
    # An earlier run's callers, with their jobs.
    ApiKey.objects.filter(name__in=(SUBMITTER_NAME, READER_NAME)).delete()
    OrmQ.objects.all().delete()  # drain tasks queued by earlier submits: no cluster runs here
    answer: dict[str, Any] = {"seed_seconds": None, "renewed": 0}
    if state == "640k":
        if seeded_counts()[0] == 0:
            began = time.monotonic()
            seed(SEED_CONTENT_CHARS)
            answer["seed_seconds"] = time.monotonic() - began
        answer["renewed"] = renew_seeded_leases()
    _, key = ApiKey.issue(SUBMITTER_NAME)
    reader, reader_key = ApiKey.issue(READER_NAME)
    job = stored_job(reader, f"read-{secrets.token_hex(4)}", content_chars)
    jobs, targets = seeded_counts()
    return {**answer, "key": key, "reader_key": reader_key, "job": job.pk, "jobs": jobs, "targets": targets}


def serve_prepare(state: str, content_chars: int) -> None:
    """``--prepare``: on the database the parent's environment names, one JSON line of what it made."""
    harness.setup_django(dict(os.environ))
    print(json.dumps(prepare(state, content_chars)), flush=True)


# --- the measurement (this process, no Django) -----------------------------------------------


@dataclass
class State:
    """One state's database, server and client, and the times measured on it."""

    name: str
    database: BenchDatabase
    info: dict[str, Any]
    server: submit.Server
    client: Client
    note: str
    submit: list[float] = field(default_factory=list)
    read: list[float] = field(default_factory=list)
    cpu_ms: float = 0.0  # gunicorn's CPU per measured round (submit, read and cancel)

    def round(self, tag: str, seq: int) -> None:
        submitted, read = round_trip(self.client, (self.info["reader_key"], self.info["job"]), tag, seq)
        self.submit.append(submitted)
        self.read.append(read)


def prepared(state: str, database: BenchDatabase, content_chars: int, metrics_dir: Path) -> dict[str, Any]:
    env = harness.service_env(database.url, metrics_dir)
    args = [sys.executable, "-m", MODULE, "--prepare", state, "--content-chars", str(content_chars)]
    done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"preparing {database.name} failed:\n{done.stdout}{done.stderr[-3000:]}")
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def round_trip(client: Client, read: tuple[str, str], tag: str, seq: int) -> tuple[float, float]:
    """A timed stored submit, a timed read of the job ``read`` names (reader's key, job id), then
    the new job cancelled: (submit, read) in seconds."""
    reader_key, job_id = read
    urls = [f"https://{tag}-{seq}.bench.invalid/{i}" for i in range(TARGETS_PER_JOB)]
    status, answer = client.call("POST", "/v1/batch", {"targets": urls})
    submitted = client.elapsed
    if status != 202:
        raise RuntimeError(f"submit {seq} answered {status}: {answer}")
    status, body = client.call("GET", f"/v1/batch/{job_id}", key=reader_key)
    reading = client.elapsed
    if status != 200 or len(body["targets"]) != TARGETS_PER_JOB:
        raise RuntimeError(f"reading job {job_id} answered {status}")
    status, body = client.call("DELETE", f"/v1/batch/{answer['id']}")
    if status != 200:
        raise RuntimeError(f"cancelling job {answer['id']} answered {status}: {body}")
    return submitted, reading


@contextmanager
def served_state(
    name: str, database: BenchDatabase, args: argparse.Namespace, workdir: Path
) -> Iterator[State]:
    """The state prepared, its gunicorn up, and a client for it."""
    metrics = workdir / f"metrics-{name}"  # each gunicorn empties its own on start
    info = prepared(name, database, args.content_chars, metrics)
    notes = []
    if info["seed_seconds"] is not None:
        notes.append(f"seeded in {info['seed_seconds']:.0f} s")
    elif name == "640k":
        notes.append("seeded database reused")
    if info["renewed"]:
        notes.append(f"{info['renewed']} leases renewed")
    execute("VACUUM ANALYZE", database=database.name)
    env = submit.server_env(metrics, database.url, raised_caps=False) | {"SIFT_BATCH_MAX_BYTES": MAX_BYTES}
    with submit.gunicorn(env, workdir, name) as server:
        client = Client(server.port, info["key"])
        try:
            yield State(name, database, info, server, client, "; ".join(notes))
        finally:
            client.close()


def measure_alternately(states: list[State], requests: int) -> float:
    """``requests`` rounds on each state, taking turns after ``WARMUP_ROUNDS`` unmeasured ones; the
    cores the rest of the machine used meanwhile.

    The turns start as soon as every server is up: gunicorn closes a keep-alive connection idle
    for 2 s, which a client would only notice on its next request.
    """
    tag = f"c{secrets.token_hex(4)}"
    for seq in range(WARMUP_ROUNDS):
        for state in states:
            state.round(f"w{tag}", seq)
    for state in states:
        state.submit.clear()
        state.read.clear()
    before, began = CpuSnapshot.take(), time.monotonic()
    for seq in range(requests):
        for state in states:
            state.round(tag, seq)
    after = CpuSnapshot.take()
    for state in states:
        used = sum(process_cores(before, after, pid, 1.0) for pid in state.server.pids())
        state.cpu_ms = used * 1000 / requests
    roots = [pid for state in states for pid in state.server.pids()]
    backends = [pid for state in states for pid in state.database.backend_pids()]
    groups = {"ours": bench_processes(roots, after.processes), "pg": backends}
    return cores_by_group(before, after, groups, time.monotonic() - began)["other"]


@contextmanager
def state_database(name: str, reseed: bool) -> Iterator[BenchDatabase]:
    """The state's database: ``empty`` recreated and dropped after; ``640k`` kept, made if missing."""
    if name == "empty":
        with EMPTY.fresh() as database:
            yield database
        return
    exists = execute(f"SELECT 1 FROM pg_database WHERE datname = '{SEEDED.name}'")
    if reseed or not exists:
        SEEDED.recreate()
    yield SEEDED


# --- the guard: bench.submit's rows ----------------------------------------------------------


def guard(args: argparse.Namespace, workdir: Path) -> list[submit.Row]:
    """``GET /healthz`` and stored submits by ``GUARD_CLIENTS`` clients, as ``bench.submit`` runs them."""
    options = argparse.Namespace(clients=GUARD_CLIENTS, targets=4, warmup=2, seconds=args.guard_seconds)
    with submit.DATABASE.fresh():
        url = submit.DATABASE.url
        submit.manage(["migrate", "--no-input"], url)
        keys = submit.issue_keys(GUARD_CLIENTS, url)
        env = submit.server_env(workdir / "metrics", url, raised_caps=True)
        with submit.gunicorn(env, workdir, "guard") as server:
            rows = [
                submit.run_phase(phase, server, keys, options, None)
                for phase in (submit.HEALTHZ, submit.SUBMIT)
            ]
        submit.check_stored(rows[-1], submit.created_jobs(rows[-1]), options.targets, None)
    return rows


# --- report ----------------------------------------------------------------------------------


def ms(values: list[float], p: float) -> float:
    return percentile(values, p) * 1000


def print_states(states: list[State], args: argparse.Namespace, cpu_other: float) -> None:
    print(
        f"\none client, {args.requests} rounds after {WARMUP_ROUNDS} unmeasured: a stored submit of "
        f"{TARGETS_PER_JOB} targets, a read of a finished {TARGETS_PER_JOB}-target job "
        f"({args.content_chars} chars each), the submitted job cancelled; times in ms. web cpu: "
        "gunicorn's CPU ms per round (all three requests). cpu oth: cores used by the rest of the "
        "machine, not by gunicorn or its PostgreSQL sessions\n"
    )
    header = (
        f"{'state':<7}{'jobs':>8}{'targets':>9}{'submit p50':>12}{'p90':>7}{'read p50':>10}{'p90':>7}"
        f"{'web cpu':>9}{'cpu oth':>9}"
    )
    print(header)
    print("-" * len(header))
    busy = "  (busy machine)" if cpu_other > BUSY_MACHINE_CORES else ""
    for s in states:
        print(
            f"{s.name:<7}{s.info['jobs']:>8}{s.info['targets']:>9}{ms(s.submit, 50):>12.1f}"
            f"{ms(s.submit, 90):>7.1f}{ms(s.read, 50):>10.1f}{ms(s.read, 90):>7.1f}{s.cpu_ms:>9.1f}"
            f"{cpu_other:>9.2f}{busy}"
        )
    for s in states:
        if s.note:
            print(f"{s.name}: {s.note}")
    worst = max(max(ms(s.submit, 50), ms(s.read, 50)) for s in states)
    verdict = "within" if worst <= AIM_MS else "OVER"
    print(f"slowest p50: {worst:.1f} ms; {verdict} the {AIM_MS:g} ms aim")


def print_guard(rows: list[submit.Row]) -> None:
    print(f"\nguard: {GUARD_CLIENTS} clients, bench.submit's rows on {submit.DATABASE.name}\n")
    submit.print_table(rows)
    healthz, stored = rows
    ratio = stored.rate / healthz.rate
    verdict = "within" if ratio >= GUARD_AIM else "UNDER"
    print(f"{stored.stored}")
    print(f"stored submits / healthz throughput: {ratio:.2f}; {verdict} the {GUARD_AIM} guard")


# --- main ------------------------------------------------------------------------------------


def bench(args: argparse.Namespace) -> None:
    print(f"PostgreSQL: {server_settings()}; load average {load_average()}")
    web = shlex.join(submit.procfile_web_command(0)[1:])
    print(f"gunicorn (the Procfile's web line): {web}; SIFT_BATCH_MAX_BYTES={MAX_BYTES}; no cluster")
    with tempfile.TemporaryDirectory(prefix="sift-bench-api-") as tmp:
        with ExitStack() as stack:
            states = []
            for name in STATES:
                print(f"state {name} ...", flush=True)
                database = stack.enter_context(state_database(name, args.reseed))
                states.append(stack.enter_context(served_state(name, database, args, Path(tmp))))
            print(f"measuring {args.requests} rounds on each state, taking turns ...", flush=True)
            cpu_other = measure_alternately(states, args.requests)
        rows = [] if args.no_guard else guard(args, Path(tmp))
    print_states(states, args, cpu_other)
    print(f"load average at the end: {load_average()}")
    if rows:
        print_guard(rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="measured rounds per state (default 200)")
    parser.add_argument(
        "--content-chars", type=int, default=3000, help="text per target of the job read (default 3000)"
    )
    parser.add_argument("--guard-seconds", type=float, default=10, help="measured seconds per guard row")
    parser.add_argument("--no-guard", action="store_true", help="skip the 16-client guard")
    parser.add_argument("--reseed", action="store_true", help="build the 640k database again")
    parser.add_argument("--prepare", choices=("empty", "640k"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    if args.prepare:
        serve_prepare(args.prepare, args.content_chars)
        return 0
    return harness.run_until_interrupted(lambda: bench(args))


if __name__ == "__main__":
    sys.exit(main())
