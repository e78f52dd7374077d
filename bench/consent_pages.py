"""The consent page set of ``bench.consent``: one article behind what a person meets on the web.

Each page imitates what a consent platform renders (its own script cannot load offline): the
elements and globals its rules in DuckDuckGo's autoconsent detect it by, written by a script
after ``load`` as the platform's is, with buttons that take the banner away. Besides them: a
generic wall, a newsletter modal, a paywall teaser that only covers, a "Read more" button and an
endless article loaded on scroll (those two with the ``actions`` they need).

``TUNED`` are the platforms sift's tests imitate too (``tests/consent_pages.py``), on which its
consent handling was built; ``HELD_OUT`` were written for this set only, from the platforms'
markup, after that work was done, and nothing was changed for them.
"""

from __future__ import annotations

import json
from typing import Any

TITLE = "The harbour that moved inland"
PARAGRAPHS = (
    "When the river silted up in the fourteenth century, the town of Winchelsea found its harbour "
    "two miles from the sea, and the merchants who had built their cellars for Gascon wine moved on.",
    "The cellars are still there, more than fifty of them, vaulted in stone under the quiet streets "
    "of the town, and a few are opened to visitors on summer weekends by the local trust.",
    "Historians read the town's decline in the customs rolls: wine imports fell by two thirds within "
    "a generation, and the king's grants to repair the quays stopped after the last great storm.",
    "Today the old shoreline can be walked along a footpath that follows the foot of the cliff, past "
    "the sheep pastures that were once the harbour basin, to the ruined gate on the Rye road.",
    "The trust hopes to map every cellar by the end of the decade, using ground radar borrowed from "
    "the university and the memories of families who kept coal and apples in them until the war.",
)
ARTICLE_TEXT = "\n".join((TITLE, *PARAGRAPHS))
BANNER = "We and our partners use cookies to store and access information on your device."
FIXED = "position:fixed;left:0;right:0;bottom:0;background:#fff;padding:1em;z-index:2147483000"


def _article(paragraphs: str | None = None, extra: str = "") -> str:
    body = paragraphs if paragraphs is not None else "".join(f"<p>{text}</p>" for text in PARAGRAPHS)
    return (
        f'<header><nav><a href="/">Home</a> <a href="/news">News</a></nav></header>'
        f'<main><article id="story"><h1>{TITLE}</h1>{body}{extra}</article></main>'
        "<footer><p>The Coast Gazette, 12 Quay Street.</p></footer>"
    )


def _page(banner_html: str, setup: str = "", then: str = "") -> str:
    """The article, and ``banner_html`` written a little after ``load``; a button with
    ``data-choice`` takes it away."""
    return f"""<!doctype html><html lang="en"><head><title>{TITLE}</title></head><body>{_article()}
<script>{setup}
window.addEventListener("load", () => setTimeout(() => {{
  const root = document.createElement("div");
  root.id = "banner-root";
  root.innerHTML = {json.dumps(banner_html)};
  document.body.appendChild(root);
  {then}
  root.addEventListener("click", (event) => {{
    if (event.target.closest("[data-choice]")) root.remove();
  }});
}}, 200));
</script></body></html>"""


def _buttons(reject: str, accept: str) -> str:
    return f"{reject}{accept}"


TUNED = {
    "onetrust": _page(
        '<div id="onetrust-consent-sdk"><div class="onetrust-pc-dark-filter"></div>'
        f'<div id="onetrust-banner-sdk" style="{FIXED}"><p>{BANNER}</p>'
        '<button id="onetrust-reject-all-handler" data-choice="reject">Reject All</button>'
        '<button id="onetrust-accept-btn-handler" data-choice="accept">Accept All Cookies</button>'
        "</div></div>"
    ),
    "cookiebot": _page(
        f'<div id="CybotCookiebotDialog" style="{FIXED}"><p>{BANNER}</p>'
        '<button id="CybotCookiebotDialogBodyLevelButtonLevelOptinDeclineAll" data-choice="reject">'
        "Deny</button>"
        '<button id="CybotCookiebotDialogBodyButtonAccept" data-choice="accept">Allow all</button></div>',
        setup="window.Cookiebot = {hasResponse: false, declined: false, dialog: {visible: true},"
        " withdraw() {}, hide() {}};",
        then="root.addEventListener('click', () => {"
        " Cookiebot.hasResponse = true; Cookiebot.dialog.visible = false; });",
    ),
    "didomi": _page(
        f'<div id="didomi-host"><div id="didomi-notice" class="didomi-notice-banner" style="{FIXED}">'
        f"<p>{BANNER}</p>"
        '<button id="didomi-notice-disagree-button" data-choice="reject">Continue without agreeing</button>'
        '<button id="didomi-notice-agree-button" data-choice="accept">Agree and close</button></div></div>'
    ),
    "quantcast_tcf": _page(
        f'<div id="qc-cmp2-container"><div id="qc-cmp2-main"><div id="qc-cmp2-ui" style="{FIXED}">'
        f'<p>{BANNER}</p><div class="qc-cmp2-summary-buttons"><button mode="secondary">More options</button>'
        '<button mode="secondary" data-choice="reject">Disagree</button>'
        '<button mode="primary" data-choice="accept">Agree</button></div></div></div></div>',
        setup="window.__tcfapi = function (command, version, callback) { callback({}, true); };",
    ),
    "usercentrics": _page(
        f'<div id="usercentrics-root" style="{FIXED}"></div>',
        setup="window.UC_UI = {isInitialized: () => true, denyAllConsents: () => Promise.resolve(),"
        " acceptAllConsents: () => Promise.resolve(), areAllConsentsAccepted: () => false,"
        " closeCMP: () => { document.getElementById('banner-root').remove(); return Promise.resolve(); }};",
        then="""const shadow = document.getElementById("usercentrics-root").attachShadow({mode: "open"});
  shadow.innerHTML = '<div data-testid="uc-container"><p>"""
        + BANNER
        + """</p><button data-testid="uc-deny-all-button">Deny</button>'
    + '<button data-testid="uc-accept-all-button">Accept All</button></div>';
  shadow.addEventListener("click", (e) => { if (e.target.closest("button")) root.remove(); });""",
    ),
}
HELD_OUT = {
    "complianz": _page(
        f'<div id="cmplz-cookiebanner-container"><div class="cmplz-cookiebanner" style="{FIXED}">'
        f'<p>{BANNER}</p><button class="cmplz-btn cmplz-deny" data-choice="reject">Deny</button>'
        '<button class="cmplz-btn cmplz-accept" data-choice="accept">Accept</button></div></div>'
    ),
    "cookieyes": _page(
        f'<div class="cky-consent-container" style="{FIXED}"><div class="cky-consent-bar"><p>{BANNER}</p>'
        '<button class="cky-btn cky-btn-reject" data-cky-tag="reject-button" data-choice="reject">'
        "Reject All</button>"
        '<button class="cky-btn cky-btn-accept" data-cky-tag="accept-button" data-choice="accept">'
        "Accept All</button>"
        "</div></div>"
    ),
    "iubenda": _page(
        f'<div id="iubenda-cs-banner" style="{FIXED}"><p>{BANNER}</p>'
        '<button class="iubenda-cs-reject-btn" data-choice="reject">Reject</button>'
        '<button class="iubenda-cs-accept-btn" data-choice="accept">Accept</button></div>'
    ),
    "cookie_script": _page(
        f'<div id="cookiescript_injected" style="{FIXED}"><p>{BANNER}</p>'
        '<div id="cookiescript_reject" data-choice="reject">Decline all</div>'
        '<div id="cookiescript_accept" data-choice="accept">Accept all</div></div>'
    ),
}
WALL_TEXT = "To read on, accept our cookies or take out a subscription."
MODAL_TEXT = "Sign up to the Gazette's newsletter: the coast's news every Friday morning."
TEASER_TEXT = "Subscribe to keep reading the Gazette's journalism."
OTHERS = {
    "generic_wall": _page(
        '<div style="position:fixed;inset:0;background:rgba(0,0,0,.75);z-index:99999">'
        f'<div style="margin:20vh auto;width:380px;background:#fff;padding:2em"><p>{WALL_TEXT}</p>'
        '<button data-choice="accept">Accept and continue</button><button>Subscribe</button></div></div>',
        setup="document.documentElement.style.overflow = 'hidden';",
    ),
    "newsletter_modal": _page(
        '<div style="position:fixed;inset:0;background:rgba(0,0,0,.5);z-index:900"></div>'
        '<div style="position:fixed;inset:0;display:flex;align-items:center;justify-content:center;'
        'z-index:901">'
        f'<div style="background:#fff;padding:2em;width:400px"><p>{MODAL_TEXT}</p>'
        '<input placeholder="Email"><button>Sign up</button></div></div>'
    ),
    "paywall_teaser": _page(
        '<div style="position:fixed;left:0;right:0;bottom:0;height:70vh;z-index:500;'
        'background:linear-gradient(transparent,#fff 30%)">'
        f'<p style="margin-top:40vh">{TEASER_TEXT}</p></div>'
    ),
}
_HIDDEN_REST = "".join(f'<p class="rest" style="display:none">{text}</p>' for text in PARAGRAPHS[2:])
READ_MORE = f"""<!doctype html><html lang="en"><head><title>{TITLE}</title></head><body>{
    _article(
        "".join(f"<p>{text}</p>" for text in PARAGRAPHS[:2]) + _HIDDEN_REST,
        '<button id="more">Read more</button>',
    )
}<script>document.getElementById("more").addEventListener("click", () => {{
  document.querySelectorAll(".rest").forEach((p) => {{ p.style.display = "block"; }});
  document.getElementById("more").remove(); }});</script></body></html>"""
ENDLESS = f"""<!doctype html><html lang="en"><head><title>{TITLE}</title>
<style>p {{ min-height: 300px; }}</style></head><body>{
    _article("".join(f"<p>{text}</p>" for text in PARAGRAPHS[:2]))
}<script>let part = 0;
window.addEventListener("scroll", () => {{
  if (part >= 3 || window.innerHeight + window.scrollY < document.body.scrollHeight - 50) return;
  part += 1;
  fetch("/endless/part" + part + ".json").then((r) => r.json()).then((d) => {{
    const p = document.createElement("p"); p.textContent = d.text;
    document.getElementById("story").appendChild(p); }});
}});</script></body></html>"""

# name -> (path, the extra options it needs)
SCROLL_STEPS: list[dict[str, Any]] = [{"type": "scroll", "times": 3}]
PAGES: dict[str, tuple[str, dict[str, Any]]] = {
    **{name: (html, {}) for name, html in {**TUNED, **HELD_OUT, **OTHERS}.items()},
    "read_more": (READ_MORE, {"actions": [{"type": "click", "selector": "#more"}]}),
    "endless_scroll": (ENDLESS, {"actions": SCROLL_STEPS}),
}
# Text no right answer holds: what covered the article.
FORBIDDEN = (BANNER, WALL_TEXT, MODAL_TEXT, TEASER_TEXT)


def files() -> dict[str, tuple[str, bytes]]:
    """Every page and the endless article's parts, by path, as ``render_pages.serving`` serves them."""
    served = {f"/{name}": ("text/html; charset=utf-8", html.encode()) for name, (html, _) in PAGES.items()}
    for number, text in enumerate(PARAGRAPHS[2:], start=1):
        served[f"/endless/part{number}.json"] = ("application/json", json.dumps({"text": text}).encode())
    return served
