"""Pages that imitate what the common consent platforms put in a page (their own scripts cannot
load here): the elements and globals DuckDuckGo's autoconsent rules detect them by, with buttons
that record the choice in the article (``Choice: reject``) and take the banner away, as the
platforms do. Each banner is written by a script after the page's load, as a platform's is."""

from __future__ import annotations

ARTICLE = (
    "Neap tides come a week after the spring tides, when the Sun and the Moon pull at right angles.",
    "Their range is the smallest of the month, and harbour masters plan the dredging by it.",
    "Fishermen on the east coast still keep a tide table pinned beside the wheelhouse door.",
)
BANNER = "We use cookies to personalise content and ads and to analyse our traffic."


def page(banner_html: str, setup: str = "", then: str = "") -> str:
    """An article, and a banner written by script a little after ``load``; ``setup`` runs first
    (a platform's globals), ``then`` once the banner is in. A button with ``data-choice`` records
    it and removes ``#banner-root``."""
    paragraphs = "".join(f"<p>{text}</p>" for text in ARTICLE)
    return f"""<!doctype html><html lang="en"><head><title>Tides</title></head><body>
<main><article id="story"><h1>Tides</h1>{paragraphs}</article></main>
<script>
{setup}
window.addEventListener("load", () => setTimeout(() => {{
  const root = document.createElement("div");
  root.id = "banner-root";
  root.innerHTML = {banner_html!r};
  document.body.appendChild(root);
  {then}
  root.addEventListener("click", (event) => {{
    const button = event.target.closest("[data-choice]");
    if (!button) return;
    const note = document.createElement("p");
    note.textContent = "Choice: " + button.dataset.choice;
    document.getElementById("story").appendChild(note);
    root.remove();
    if (window.Cookiebot) {{ Cookiebot.hasResponse = true; Cookiebot.dialog.visible = false; }}
  }});
}}, 150));
</script></body></html>"""


FIXED = "position:fixed;left:0;right:0;bottom:0;background:#fff;padding:1em;z-index:1000"

ONETRUST = page(
    f'<div id="onetrust-consent-sdk"><div class="onetrust-pc-dark-filter"></div>'
    f'<div id="onetrust-banner-sdk" style="{FIXED}"><p>{BANNER}</p>'
    '<button id="onetrust-reject-all-handler" data-choice="reject">Reject All</button>'
    '<button id="onetrust-accept-btn-handler" data-choice="accept">Accept All Cookies</button></div></div>'
)
# A OneTrust banner that offers no reject: under the default it is removed, never accepted.
ONETRUST_NO_REJECT = page(
    f'<div id="onetrust-consent-sdk"><div id="onetrust-banner-sdk" style="{FIXED}"><p>{BANNER}</p>'
    '<button id="onetrust-accept-btn-handler" data-choice="accept">Accept All Cookies</button></div></div>'
)
COOKIEBOT = page(
    f'<div id="CybotCookiebotDialog" style="{FIXED}"><p>{BANNER}</p>'
    '<button id="CybotCookiebotDialogBodyLevelButtonLevelOptinDeclineAll" data-choice="reject">Deny</button>'
    '<button id="CybotCookiebotDialogBodyLevelButtonAccept" data-choice="accept">Allow selection</button>'
    '<button id="CybotCookiebotDialogBodyButtonAccept" data-choice="accept">Allow all</button></div>',
    setup="window.Cookiebot = {hasResponse: false, declined: false, dialog: {visible: true},"
    " withdraw() {}, hide() {}};",
)
DIDOMI = page(
    f'<div id="didomi-host"><div id="didomi-notice" class="didomi-notice-banner" style="{FIXED}">'
    f"<p>{BANNER}</p>"
    '<button id="didomi-notice-disagree-button" data-choice="reject">Continue without agreeing</button>'
    '<button id="didomi-notice-agree-button" data-choice="accept">Agree and close</button></div></div>'
)
# Quantcast Choice, the common TCF platform: its summary buttons, "more options" then "disagree".
QUANTCAST_TCF = page(
    f'<div id="qc-cmp2-container"><div id="qc-cmp2-main"><div id="qc-cmp2-ui" style="{FIXED}">'
    f'<p>{BANNER}</p><div class="qc-cmp2-summary-buttons">'
    '<button mode="secondary">More options</button>'
    '<button mode="secondary" data-choice="reject">Disagree</button>'
    '<button mode="primary" data-choice="accept">Agree</button></div></div></div></div>',
    setup="window.__tcfapi = function (command, version, callback) { callback({}, true); };",
)
# Usercentrics' banner lives in a shadow root of #usercentrics-root, with UC_UI its API.
USERCENTRICS = page(
    f'<div id="usercentrics-root" style="{FIXED}"></div>',
    setup="""const record = (choice) => { const note = document.createElement("p");
  note.textContent = "Choice: " + choice; document.getElementById("story").appendChild(note); };
let accepted = false;
window.UC_UI = {isInitialized: () => true, isConsentRequired: () => true,
  acceptAllConsents: () => { accepted = true; record("accept"); return Promise.resolve(); },
  denyAllConsents: () => { record("reject"); return Promise.resolve(); },
  closeCMP: () => { const root = document.getElementById("banner-root");
    if (root) root.remove(); return Promise.resolve(); },
  areAllConsentsAccepted: () => accepted};""",
    then=f"""const host = document.getElementById("usercentrics-root");
  const shadow = host.attachShadow({{mode: "open"}});
  shadow.innerHTML = '<div data-testid="uc-container"><p>{BANNER}</p>'
    + '<button data-testid="uc-deny-all-button" data-choice="reject">Deny</button>'
    + '<button data-testid="uc-accept-all-button" data-choice="accept">Accept All</button></div>';
  shadow.addEventListener("click", (event) => {{
    const button = event.target.closest("[data-choice]");
    if (!button) return;
    const note = document.createElement("p");
    note.textContent = "Choice: " + button.dataset.choice;
    document.getElementById("story").appendChild(note);
    root.remove();
  }});""",
)
# A wall of no known platform, covering the article, with no reject: removed, never accepted.
GENERIC_WALL_TEXT = "Before you continue, accept our cookies or subscribe."
GENERIC_WALL = page(
    '<div style="position:fixed;inset:0;background:rgba(0,0,0,.7);z-index:99999">'
    f'<div style="margin:20vh auto;width:360px;background:#fff;padding:2em"><p>{GENERIC_WALL_TEXT}</p>'
    '<button data-choice="accept">Accept and continue</button></div></div>',
    setup="document.documentElement.style.overflow = 'hidden';",
)
NEWSLETTER_TEXT = "Subscribe to the harbour newsletter for weekly tide tables."
NEWSLETTER = page(
    '<div style="position:fixed;inset:0;background:rgba(0,0,0,.5)"></div>'
    '<div style="position:fixed;top:0;left:0;width:100vw;height:100vh;display:flex;align-items:center;'
    f'justify-content:center"><div style="background:#fff;padding:2em">{NEWSLETTER_TEXT}</div></div>'
)

PLATFORMS = {
    "onetrust": ONETRUST,
    "cookiebot": COOKIEBOT,
    "didomi": DIDOMI,
    "quantcast_tcf": QUANTCAST_TCF,
    "usercentrics": USERCENTRICS,
}
