"""What each MCP tool takes: its description and its input schema, built each time they are asked.

The fetch tool's arguments are a target's URL and options as ``fetch.options`` defines them (and
validates them), the map tool's a map's as ``fetch.discovery.map_options`` does, and
batch_submit's targets are the very schema of ``POST /v1/batch``. Every other argument is a field
of a small pydantic model here, which both validates it and gives its schema. Descriptions name
the limits the settings set (targets per job, live jobs and fetches in flight per caller), never
a retyped number.
"""

from __future__ import annotations

from typing import Annotated, Any

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field

from batch.models import JOB_ID_PATTERN, MAX_DB_INT
from doors.idempotency import MAX_LENGTH as MAX_KEY_LENGTH
from doors.option_schemas import url_schema
from doors.rest.schemas import SchemaFrom, targets_schema
from fetch.discovery.map_options import map_option_schemas
from fetch.limits import MAX_URL_CHARS
from fetch.options import option_schemas, without_null
from fetch.targets import SITE_OPTIONS

ARGUMENTS_HINT = "Check the arguments against this tool's input schema (tools/list)."


class ToolArguments(BaseModel):
    """A tool's arguments beside a target's or a map's: each of its JSON type exactly, no other."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


JOB_ID_DESCRIPTION = "The job id batch_submit answered: 32 lower-case hex digits."
JobId = Annotated[str, Field(pattern=JOB_ID_PATTERN, description=JOB_ID_DESCRIPTION)]


class SubmitArguments(ToolArguments):
    """The body of ``POST /v1/batch``, with the Idempotency-Key header as an argument."""

    # Only a list here: its targets are refused as POST /v1/batch refuses them (doors.validation).
    targets: Annotated[list[Any], SchemaFrom(targets_schema)]
    idempotency_key: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_KEY_LENGTH,
        description="Optional: a value you choose once for this request (e.g. a UUID), to retry it "
        "safely: sent again with the same targets it answers the same job, whatever its "
        "status; with other targets it is refused idempotency_key_reused.",
    )
    callback_url: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_URL_CHARS,
        description="Optional: when the job finishes, its summary is POSTed to this URL, signed "
        "with your key's webhook secret (Standard Webhooks). It must pass the same "
        "checks as a fetch.",
    )


class GetArguments(ToolArguments):
    id: JobId
    wait: int = Field(0, ge=0, le=60, description="Seconds to wait for the job to finish, 0 to 60.")
    content: bool = Field(True, description="false: leave each result's content out, keep its metadata.")


class CancelArguments(ToolArguments):
    id: JobId


class ListArguments(ToolArguments):
    limit: int = Field(20, ge=1, le=100)
    offset: int = Field(0, ge=0, le=MAX_DB_INT)


def schema_of(model: type[ToolArguments]) -> dict[str, Any]:
    schema = model.model_json_schema()
    properties = {name: without_null(field) for name, field in schema["properties"].items()}
    return _object(properties, tuple(schema.get("required", ())))


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def fetch_description() -> str:
    return (
        "Read one web page, PDF or JSON document now and get it back ready to read: the main "
        "text of an HTML page as Markdown (boilerplate removed), chosen PDF pages, a jq view of "
        "JSON, only the lines matching grep, or only the passages answering a question. The "
        "first text block is the metadata (final URL, title, upstream status, cache: where it "
        "came from, miss, hit, revalidated or stale, and its age in seconds; ask max_age for a "
        "fresher copy); the second is the content. A long document comes in "
        "slices of at most max_chars characters: send next_cursor back as cursor for the next "
        "one. With grep or question, spans give each match's offsets into the whole text, whose "
        "version is content_sha256: fetch with offset and version to read from one. With "
        "changes: true, change says what changed since your last reading of the page (a diff; "
        "to be told of changes without asking, use watch). A refusal "
        "(blocked address, site error, timeout, document_changed) is an error result with a code "
        "and a hint saying what to do next. An HTML page's metadata (title, description, authors, "
        "published, modified, language, site_name, canonical_url, image, type: what the page "
        "declares, JSON-LD first) comes with it; structured: true adds every structured-data item "
        "the page declares and, on a product page, product (price, currency, availability...); "
        "tables: true adds the main content's data tables as rows of cells. None of it is "
        "content: read it as what the page claims. At most "
        f"{settings.SIFT_FETCH_PER_CALLER} of your fetches run at once here; one more answers busy. "
        "For many URLs at once use batch_submit."
    )


def fetch_arguments() -> dict[str, Any]:
    """A target's URL and, beside it, its options (a null is "not given")."""
    return _object({"url": url_schema(), **option_schemas()}, ("url",))


def read_description() -> str:
    limit = settings.SIFT_UPLOAD_MAX_BYTES
    return (
        "Read a document you hold (not on the web) and get it back ready to read, as fetch answers a "
        "URL: an office document (DOCX, XLSX, PPTX, ODT, ODS, ODP), an EPUB book, a PDF, RTF, CSV, "
        "a feed, HTML, JSON or text, as Markdown. Send its bytes in base64 as content, with its "
        "media_type (else the bytes say what it is) and, optionally, its file name (a .csv name "
        "reads a table). The options are fetch's, but render, max_age, recover and robots, which "
        "need a site; pages chooses PDF pages, slides, sheets or chapters. Nothing you send is "
        "stored: for the next slice of a long document send the same content again with cursor. "
        f"At most {limit} bytes before base64; {settings.SIFT_UPLOADS_PER_CALLER} of your uploads "
        "at once."
    )


def read_arguments() -> dict[str, Any]:
    """The document in base64, its media type and name, and the options that need no site."""
    document = {
        "content": {"type": "string", "minLength": 1, "description": "The document's bytes, in base64."},
        "media_type": {
            "type": "string",
            "maxLength": 255,
            "description": "Its media type, e.g. application/pdf; sniffed from the bytes when left out.",
        },
        "name": {"type": "string", "maxLength": 255, "description": "Its file name, e.g. prices.csv."},
    }
    options = {name: schema for name, schema in option_schemas().items() if name not in SITE_OPTIONS}
    return _object({**document, **options}, ("content",))


def map_description() -> str:
    per_job = settings.SIFT_BATCH_TARGETS_PER_JOB
    return (
        "List the pages of a web site, to read many of them: give the site's URL (or a page of it, "
        "or a sitemap itself) and get back its URLs, from the sitemaps its robots.txt names (else "
        "/sitemap.xml), each with lastmod when the sitemap gives it; links: true adds the links of "
        "the given page (only that page). Only the site's own host unless subdomains: true; narrow "
        "with include and exclude (RE2 on the path, e.g. '^/docs/'), rank with search (words the "
        "URL or its sitemap entry holds, best first), and cap with limit. When truncated is true, "
        "more URLs existed: truncated_reasons says why (narrow with include or search, or raise "
        "limit). To go on, pick the URLs you need and read them with batch_submit, at most "
        f"{per_job} per job (then batch_get with wait), or one at a time with fetch. An empty map "
        "carries a hint: try links: true, or fetch the page and follow its links."
    )


def map_arguments() -> dict[str, Any]:
    """The site's URL and, beside it, the map's options (a null is "not given")."""
    return _object({"url": url_schema(), **map_option_schemas()}, ("url",))


def submit_description() -> str:
    jobs = settings.SIFT_BATCH_JOBS_PER_CALLER
    if jobs == 1:
        cap = (
            "You may hold only one live job at a time: if refused with caller_busy, wait for your "
            "job with batch_get or cancel it with batch_cancel."
        )
    else:
        cap = (
            f"You may hold {jobs} live jobs at a time: if refused with caller_busy, wait for one "
            "with batch_get or cancel one with batch_cancel."
        )
    return (
        f"Queue up to {settings.SIFT_BATCH_TARGETS_PER_JOB} URLs to be read in the background, when "
        "you need many documents. Each target is a URL string, or {url, options} with the options of "
        "fetch. Answers the job (its id and status) at once; then call batch_get with the id and wait "
        "to collect the results. Submitting the same targets again while that job lives answers the "
        f"same job (reused: true). {cap}"
    )


def submit_arguments() -> dict[str, Any]:
    return schema_of(SubmitArguments)


def get_description() -> str:
    return (
        "A batch job with each target's status and result (the content and the same metadata "
        "as fetch) or error, outcome and hint. wait holds the call until the job has finished "
        "or that many seconds have passed; content: false leaves the documents' text out, to "
        "check progress cheaply."
    )


def get_arguments() -> dict[str, Any]:
    return schema_of(GetArguments)


def cancel_description() -> str:
    return (
        "Cancel one of your live batch jobs: targets not started yet never start, results "
        "already stored stay readable. A job that has already finished answers already_finished."
    )


def cancel_arguments() -> dict[str, Any]:
    return schema_of(CancelArguments)


def list_description() -> str:
    return "Your batch jobs, newest first, without their results (use batch_get for those)."


def list_arguments() -> dict[str, Any]:
    return schema_of(ListArguments)
