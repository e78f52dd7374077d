"""``fetch.options``: the one definition of a target's options, and validation that holds to it."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from fetch.options import TargetOptions, option_schemas
from fetch.targets import InvalidTarget, Target, parse_options

TEXT_OPTIONS = [name for name, schema in option_schemas().items() if schema.get("type") == "string"]
BOOLEAN_OPTIONS = [name for name, schema in option_schemas().items() if schema.get("type") == "boolean"]
INTEGER_OPTIONS = [name for name, schema in option_schemas().items() if schema.get("type") == "integer"]


def _refusal(raw: object) -> InvalidTarget:
    with pytest.raises(InvalidTarget) as refused:
        parse_options(raw, compile_programs=False)
    return refused.value


def test_every_option_has_a_type_and_a_description_and_nothing_else_is_an_option() -> None:
    schemas = option_schemas()
    assert list(schemas) == list(TargetOptions.model_fields)
    assert all(
        (schema.get("type") in ("string", "boolean", "integer", "array") or name == "render")
        and schema["description"]
        for name, schema in schemas.items()
    )
    assert schemas["render"]["anyOf"] == [{"type": "boolean"}, {"type": "string", "enum": ["auto"]}]
    assert schemas["mode"]["enum"] == ["markdown", "text", "raw"]
    assert schemas["hidden"]["enum"] == ["drop", "keep"]
    assert schemas["pages"]["pattern"] == r"^[0-9,\-\s]+$"
    assert _refusal({"colour": "red"}).hint == "Known options: " + ", ".join(schemas) + "."


@pytest.mark.parametrize("name", [n for n in TEXT_OPTIONS if "enum" not in option_schemas()[n]])
def test_a_text_option_is_taken_at_its_schemas_max_length_and_refused_one_character_over(name) -> None:
    limit = option_schemas()[name]["maxLength"]
    assert getattr(parse_options({name: "1" * limit}, compile_programs=False), name) == "1" * limit
    refused = _refusal({name: "1" * (limit + 1)})
    assert (refused.field, refused.message) == (
        f"options.{name}",
        f"{name} is longer than {limit} characters",
    )
    assert refused.hint == f"Shorten {name} to at most {limit} characters."


@pytest.mark.parametrize("name", BOOLEAN_OPTIONS)
def test_a_boolean_option_is_refused_as_anything_but_a_json_boolean(name) -> None:
    refused = _refusal({name: "yes"})
    assert (refused.field, refused.message) == (f"options.{name}", f"{name} must be true or false")


@pytest.mark.parametrize("name", INTEGER_OPTIONS)
def test_an_integer_option_is_taken_within_its_schemas_bounds_and_refused_outside_or_as_another_type(
    name,
) -> None:
    least, most = option_schemas()[name]["minimum"], option_schemas()[name]["maximum"]
    needed = {"version": "0" * 64} if name == "offset" else {}  # an offset is into a version
    assert getattr(parse_options({name: least, **needed}), name) == least
    assert getattr(parse_options({name: most, **needed}), name) == most
    for value in (least - 1, most + 1, True, 1.0, "1"):
        refused = _refusal({name: value, **needed})
        assert (refused.field, refused.message) == (
            f"options.{name}",
            f"{name} must be a whole number from {least} to {most}",
        )


def test_max_age_is_an_integer_option_of_seconds_from_zero() -> None:
    assert "max_age" in INTEGER_OPTIONS
    assert option_schemas()["max_age"]["minimum"] == 0


def test_a_mode_outside_the_schemas_enum_is_refused_naming_the_enum() -> None:
    refused = _refusal({"mode": "pdf"})
    assert (refused.field, refused.message, refused.hint) == (
        "options.mode",
        "unknown mode 'pdf'",
        "Use one of: markdown, text, raw.",
    )
    assert _refusal({"mode": 3}).message == "unknown mode 'int'"


def test_null_leaves_every_option_at_its_default_mode_included() -> None:
    every_null = dict.fromkeys(option_schemas())
    assert parse_options(every_null) == TargetOptions()
    assert parse_options(every_null).to_dict() == {}


@pytest.mark.parametrize("pages", ["one", "1;2", "1-2,x", "\u00bd"])
def test_pages_are_refused_by_validation_whenever_the_schemas_pattern_refuses_them(pages) -> None:
    schema = {"type": "object", "properties": {"pages": option_schemas()["pages"]}}
    assert list(Draft202012Validator(schema).iter_errors({"pages": pages}))
    assert _refusal({"pages": pages}).field == "options.pages"


def test_the_canonical_form_keeps_only_what_differs_from_the_defaults() -> None:
    options = parse_options({"mode": "text", "recover": False, "context": None, "grep": "tide"})
    assert options.to_dict() == {"mode": "text", "grep": "tide"}
    assert TargetOptions(**options.to_dict()) == options


def test_render_takes_true_false_or_auto_and_nothing_else() -> None:
    for value in (True, False, "auto"):
        assert parse_options({"render": value}, compile_programs=False).render == value
    for wrong in ("yes", "true", 1, 0):
        refused = _refusal({"render": wrong})
        assert refused.field == "options.render"
        assert refused.hint == "Send render as a JSON boolean or as one of: auto."


def test_hidden_takes_drop_or_keep_and_images_a_boolean() -> None:
    options = parse_options({"hidden": "keep", "images": True}, compile_programs=False)
    assert (options.hidden, options.images) == ("keep", True)
    assert _refusal({"hidden": "show"}).hint == "Use one of: drop, keep."


@pytest.mark.parametrize(
    "raw",
    [
        {"max_chars": True},
        {"max_chars": "5"},
        {"max_age": 1.0},
        {"offset": 3},
        {"cursor": "abc", "version": "0" * 64},
        {"offset": 0, "version": "0" * 64, "question": "why"},
        {"pages": "3-1"},
        {"grep": "a\x00"},
        {"question": "\ud800"},
        {"jq": "   "},
        {"colour": "red"},
    ],
)
def test_the_model_itself_refuses_what_validation_refuses(raw) -> None:
    _refusal(raw)
    with pytest.raises(ValidationError):
        TargetOptions.model_validate(raw)


def test_max_chars_is_bounded_by_the_setting_as_it_is_at_each_request(settings) -> None:
    settings.SIFT_FETCH_MAX_CHARS = 1000
    refused = _refusal({"max_chars": 1001})
    assert (refused.field, refused.message) == (
        "options.max_chars",
        "max_chars must be a whole number from 1 to 1000",
    )
    settings.SIFT_FETCH_MAX_CHARS = 2000
    assert parse_options({"max_chars": 1001}).max_chars == 1001


@pytest.mark.parametrize("name", ["question", "pages", "grep", "jq", "cursor"])
def test_a_text_option_refuses_blank_text_a_nul_and_a_lone_surrogate_saying_which(name) -> None:
    blank, nul, lone = _refusal({name: "  "}), _refusal({name: "1\x00"}), _refusal({name: "1\ud800"})
    assert {blank.field, nul.field, lone.field} == {f"options.{name}"}
    assert (blank.message, blank.hint) == (
        f"{name} must be a non-empty string",
        f"Send {name} as a string, or leave it out.",
    )
    assert (nul.message, nul.hint) == (
        f"{name} holds a NUL character",
        f"Remove the NUL character from {name}.",
    )
    assert lone.message == f"{name} is not valid Unicode text (it holds a lone surrogate)"


def test_an_option_named_with_a_lone_surrogate_is_refused_as_unknown_and_echoed_escaped() -> None:
    refused = _refusal({"mode": "text", "q\ud800": 1})
    assert (refused.field, refused.message) == ("options.q\\ud800", "unknown option 'q\\\\ud800'")


def test_options_that_are_not_an_object_are_refused_naming_options() -> None:
    for raw in ("text", ["mode"], 3):
        refused = _refusal(raw)
        assert (refused.field, refused.message) == ("options", "options must be an object")


def test_a_stored_target_keeps_what_it_was_accepted_with_after_the_setting_is_tightened(settings) -> None:
    settings.SIFT_FETCH_MAX_CHARS = 5000
    accepted = parse_options({"max_chars": 5000, "grep": "tide"})
    settings.SIFT_FETCH_MAX_CHARS = 1000
    stored = Target.from_stored("https://example.org/", {**accepted.to_dict(), "retired_option": 1})
    assert stored.options == accepted
    assert _refusal({"max_chars": 5000}).field == "options.max_chars"
