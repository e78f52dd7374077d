"""Sandbox children reveal nothing of the server: no environment, no files, no descriptors.

Each test sets secret-looking variables in this process's environment first and starts fresh
children after that, so a child that inherited the environment would show them.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jq
import pytest
from django.db import connection
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from fetch.documents.json_text import json_text
from fetch.errors import FetchError
from fetch.sandbox import pool as sandbox_module
from fetch.sandbox.jq_program import MODULES_REFUSED, compile_jq, jq_without_modules
from fetch.sandbox.pool import Sandbox

from .factories import LOOPBACK

SECRET = "sift-test-secret-key-7f3a9c"
DB_PASSWORD = "db-password-91c2e4"
MARKER = "parent-marker-5d1e08"
MARKERS = (SECRET, DB_PASSWORD, MARKER)
DOCUMENT = b'{"items": [1, 2, 3]}'


@pytest.fixture
def secret_parent(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SECRET_KEY", SECRET)
    monkeypatch.setenv("DATABASE_URL", f"postgres://sift:{DB_PASSWORD}@127.0.0.1:5432/sift")
    monkeypatch.setenv("SIFT_TEST_MARKER", MARKER)
    sandbox_module.shutdown()  # this process's children start again, with the variables set
    yield
    sandbox_module.shutdown()


@pytest.fixture
def pool(secret_parent: None) -> Iterator[Sandbox]:
    sandbox = Sandbox(children=1)
    yield sandbox
    sandbox.close()


@pytest.fixture
def module_folder(tmp_path: Path) -> Path:
    """A folder of jq modules and data files that hold the marker."""
    (tmp_path / "secret.jq").write_text(f'def leak: "{MARKER}";\n')
    (tmp_path / "secret.json").write_text(json.dumps({"secret": MARKER}))
    (tmp_path / "broken.jq").write_text(f'def leak: "{MARKER};\n')  # a syntax error quotes the line
    return tmp_path


def run_jq(pool: Sandbox, program: str) -> tuple[dict[str, Any], str]:
    reply, data = pool.run(
        "json",
        {"program": program, "max_chars": 100_000},
        DOCUMENT,
        cpu_seconds=5,
        wall_seconds=20,
        subject="the jq program",
        hint="",
        max_reply_bytes=1 << 20,
    )
    return reply, data.decode()


def assert_no_marker(*texts: str) -> None:
    for text in texts:
        for marker in MARKERS:
            assert marker not in text


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ("$ENV", "{}"),
        ("env", "{}"),
        ("$ENV.SECRET_KEY", "null"),
        ("env.DATABASE_URL", "null"),
        ('$ENV.SIFT_TEST_MARKER // "absent"', '"absent"'),
        ("[env | keys[]] | length", "0"),
        ("[limit(5; env | to_entries[])]", "[]"),
        ('env | @sh "key=\\(.SECRET_KEY)"', '"key=null"'),
        ("input_filename", "null"),
        ("$__loc__", '{\n  "file": "<top-level>",\n  "line": 1\n}'),
        ("get_search_list", "[]"),
        ("[get_jq_origin, get_prog_origin]", "[]"),
    ],
)
def test_jq_in_a_child_sees_no_variable_of_the_parent(pool: Sandbox, program: str, expected: str) -> None:
    assert os.environ["SIFT_TEST_MARKER"] == MARKER  # the parent does have them

    reply, text = run_jq(pool, program)

    assert "error" not in reply
    assert text == expected
    assert_no_marker(text)


@pytest.mark.parametrize("program", ["$__prog_args", "input_line_number", "$ARGS", "$__prog_name"])
def test_jq_builtins_that_would_name_the_invocation_fail_without_revealing_anything(
    pool: Sandbox, program: str
) -> None:
    reply, text = run_jq(pool, program)

    assert reply["error"] == "jq_error"
    assert (text, reply["message"]) != ("", "")
    assert_no_marker(text, json.dumps(reply))


def module_programs(folder: Path) -> list[str]:
    return [
        f'include "secret" {{search: "{folder}"}}; leak',
        f'import "secret" as $s {{search: "{folder}"}}; $s',
        f'import "secret" as s {{search: "{folder}"}}; s::leak',
        f'include "broken" {{search: "{folder}"}}; .',
        f'# a comment first\ninclude "secret" {{search: "{folder}"}}; leak',
        f'# a comment continued \\\n.\ninclude "secret" {{search: "{folder}"}}; leak',
        f'module {{a: 1}};\nimport "secret" as $s {{search: "{folder}"}}; $s',
    ]


def test_jq_outside_the_sandbox_would_read_modules_from_any_folder(module_folder: Path) -> None:
    # The threat the wrapper removes: the bare library reads files named by the program.
    bare = jq.compile(f'import "secret" as $s {{search: "{module_folder}"}}; $s').input_text("null")
    assert MARKER in json.dumps(bare.all())


def test_jq_in_a_child_cannot_import_or_include_a_module(pool: Sandbox, module_folder: Path) -> None:
    for program in module_programs(module_folder):
        reply, text = run_jq(pool, program)

        assert reply == {"error": "jq_error", "message": MODULES_REFUSED}, program
        assert_no_marker(text, json.dumps(reply))


def test_a_jq_program_with_a_module_is_invalid_request_naming_modules(
    secret_parent: None, module_folder: Path
) -> None:
    with pytest.raises(FetchError) as caught:
        json_text(DOCUMENT.decode(), module_programs(module_folder)[0], max_chars=10_000)

    assert caught.value.outcome == "invalid_request"
    assert MODULES_REFUSED in caught.value.message
    assert_no_marker(caught.value.message, caught.value.hint)


def test_compiling_a_program_with_a_module_reads_no_file_and_names_no_path(module_folder: Path) -> None:
    for program in module_programs(module_folder):
        with pytest.raises(ValueError, match=re.escape(MODULES_REFUSED)) as caught:
            compile_jq(program)

        assert str(caught.value) == MODULES_REFUSED


def test_compile_errors_of_programs_without_modules_are_jq_s_own() -> None:
    with pytest.raises(ValueError, match="is not defined at <top-level>, line 1, column 1:"):
        compile_jq("$__prog_args")
    with pytest.raises(ValueError, match="syntax error"):
        compile_jq(".[")


@pytest.mark.parametrize(
    "program",
    [
        ".",
        ".items[1]",
        ". # a trailing comment",
        ". # a trailing comment continued \\",
        "# a leading comment\n.items",
        "def twice: . * 2; .items | map(twice)",
        "reduce .items[] as $x (0; . + $x)",
        '"\\(.items[0]) of \\(.items | length)"',
        ".items[] | select(. > 1)",
        "$__loc__",
        "{include: 1, import: 2, module: 3}",
        '.items | map(tostring) | index("2")',
        "label $out | .items[] | if . == 2 then ., break $out else . end",
        ". as {items: [$first]} | $first",
    ],
)
def test_a_program_without_modules_gives_the_same_outputs_inside_the_wrapper(program: str) -> None:
    bare = jq.compile(program).input_text(DOCUMENT.decode()).all()

    assert jq.compile(jq_without_modules(program)).input_text(DOCUMENT.decode()).all() == bare


# Text around a directive: comments (continued or not), blank lines, strings, backslashes.
_JUNK = st.lists(st.sampled_from([*'# \n\t\\";.x$()', "include", "import", "def f: .;"])).map("".join)


@hypothesis_settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(before=_JUNK, after=_JUNK)
def test_no_text_around_a_directive_lets_the_wrapped_program_load_a_module(
    module_folder: Path, before: str, after: str
) -> None:
    # broken.jq does not compile: had jq opened it, the error would name it and quote its line.
    program = f'{before}include "broken" {{search: "{module_folder}"}};{after}'
    try:
        jq.compile(jq_without_modules(program))
        message = ""
    except ValueError as exc:
        message = str(exc)

    assert "broken.jq" not in message  # the program says "broken"; only a load names the file
    assert MARKER not in message


_STEPS = st.sampled_from(
    [".", ".items", ".items[0]", "length", "keys?", "map(. * 2)?", ".[]?", "select(. != null)", "tostring"]
)


@hypothesis_settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(_STEPS, min_size=1, max_size=4),
    lead=st.sampled_from(["", "# lead\n", "\n\n", "def id2: .; "]),
    trail=st.sampled_from(["", " # trail", " # trail \\", "\n", " # a\n# b \\\\"]),
)
def test_any_program_without_modules_gives_the_same_outputs_inside_the_wrapper(
    steps: list[str], lead: str, trail: str
) -> None:
    program = lead + " | ".join(steps) + trail

    def outputs(text: str) -> Any:
        try:
            return jq.compile(text).input_text(DOCUMENT.decode()).all()
        except ValueError as exc:
            return ("error", str(exc).splitlines()[-1] if "compile" in str(exc) else str(exc))

    assert outputs(jq_without_modules(program)) == outputs(program)


@pytest.mark.django_db
def test_a_child_inherits_only_its_pipes_and_no_database_connection(secret_parent: None) -> None:
    connection.ensure_connection()  # a database socket (PostgreSQL) or file (SQLite) is open
    left, right = socket.socketpair()
    left.set_inheritable(True)  # even a descriptor marked inheritable stays behind
    pool = Sandbox(children=1)
    try:
        reply, _ = pool.run(
            "ping", {}, b"", cpu_seconds=5, wall_seconds=20, subject="ping", hint="", max_reply_bytes=1 << 16
        )
    finally:
        pool.close()
        left.close()
        right.close()

    descriptors = reply["fds"]
    assert sorted(descriptors) == ["0", "1", "2", "3", "4"]
    assert descriptors["0"].startswith("pipe:")
    assert descriptors["3"].startswith("pipe:")  # the reply pipe, moved off stdout
    assert descriptors["4"] == os.readlink("/proc/self/fd/2")  # its log lines, to this stderr
    assert (descriptors["1"], descriptors["2"]) == ("/dev/null", "/dev/null")
    assert reply["cwd"] == "/"


# --- through the API ------------------------------------------------------------------------


@pytest.fixture
def open_loopback(settings: Any) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_CACHE_TTL = 900


@pytest.mark.parametrize(
    ("program", "expected"),
    [("$ENV", "{}"), ("env.SECRET_KEY", "null"), ("$ENV.DATABASE_URL", "null"), ("input_filename", "null")],
)
def test_v1_fetch_with_jq_reveals_nothing_of_the_server(
    agent: Any, httpserver: Any, open_loopback: None, secret_parent: None, program: str, expected: str
) -> None:
    _, client = agent
    httpserver.expect_request("/data.json").respond_with_data(DOCUMENT, content_type="application/json")

    response = client.get("/v1/fetch", url=httpserver.url_for("/data.json"), jq=program)

    assert response.status_code == 200, response.content
    assert response.json()["content"] == expected
    assert_no_marker(response.content.decode())


def test_v1_fetch_with_a_jq_module_is_refused_without_reading_it(
    agent: Any, httpserver: Any, open_loopback: None, secret_parent: None, module_folder: Path
) -> None:
    _, client = agent
    httpserver.expect_request("/data.json").respond_with_data(DOCUMENT, content_type="application/json")
    program = f'import "secret" as $s {{search: "{module_folder}"}}; $s'

    response = client.post("/v1/fetch", {"url": httpserver.url_for("/data.json"), "options": {"jq": program}})

    assert response.status_code == 400, response.content
    assert MODULES_REFUSED in response.json()["error"]
    assert_no_marker(response.content.decode())


def test_validating_a_submission_with_a_jq_module_reads_no_file(agent: Any, module_folder: Path) -> None:
    _, client = agent
    program = f'include "broken" {{search: "{module_folder}"}}; .'

    response = client.post(
        "/v1/batch", {"targets": [{"url": "https://example.org/", "options": {"jq": program}}]}
    )

    assert response.status_code == 400, response.content
    assert MODULES_REFUSED in response.json()["error"]
    assert str(module_folder) not in response.content.decode()
