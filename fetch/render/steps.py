"""The ``actions`` option's steps, as a caller sends them (docs/api.md, docs/rendering.md): one
model per kind, told apart by ``type``, validated with the rest of a target's options
(``fetch.options.TargetOptions``). The render process runs them (``actions.py``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_STEPS = 10
MAX_SELECTOR_CHARS = 500
MAX_SCROLLS = 20
MAX_WAIT_MILLISECONDS = 10_000
# A key or chord as Playwright names it: "Enter", "PageDown", "Escape", "Control+a".
KEY_PATTERN = r"^[A-Za-z0-9]+(\+[A-Za-z0-9]+)*$"


class Step(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


def _selector(value: str) -> str:
    if not value.strip() or "\x00" in value:
        raise ValueError("the selector is blank or holds a NUL character")
    return value


SELECTOR = Field(
    min_length=1,
    max_length=MAX_SELECTOR_CHARS,
    description="A CSS selector (as document.querySelector reads it); its first match is used.",
)


class Click(Step):
    type: Literal["click"]
    selector: str = SELECTOR
    _plain = field_validator("selector")(_selector)


class Scroll(Step):
    type: Literal["scroll"]
    times: int = Field(
        default=1,
        ge=1,
        le=MAX_SCROLLS,
        description="How many times to scroll to the page's end, the page settling each time.",
    )


class WaitFor(Step):
    type: Literal["wait_for"]
    selector: str = SELECTOR
    _plain = field_validator("selector")(_selector)


class Wait(Step):
    type: Literal["wait"]
    milliseconds: int = Field(ge=1, le=MAX_WAIT_MILLISECONDS, description="How long to wait.")


class Press(Step):
    type: Literal["press"]
    key: str = Field(
        min_length=1, max_length=40, pattern=KEY_PATTERN, description='A key, e.g. "Enter", "PageDown".'
    )


Action = Annotated[Click | Scroll | WaitFor | Wait | Press, Field(discriminator="type")]
