// Answers a consent banner or wall in one frame, once the page is ready (fetch/render/consent.py).
// DuckDuckGo's autoconsent (its CommonJS build, wrapped below in place of LIBRARY) finds the
// consent platform by its rules and clicks reject (optOut) or accept (optIn) as a person would;
// one detection pass, on the page as it now is, never started by the page's own load.
// The rules come as JSON text: the compact ones (COMPACT_RULES below) unless others are given.
// Answers [what was done, the platform's name]: "rejected" | "accepted" | "removed" | null.
// An init script defines it in every frame (unrun, it costs a frame only its parse); the render
// process calls it once the page is ready.
(() => {
const COMPACT_RULES = /*COMPACT_RULES*/;
// Where nothing in the frame looks like a consent platform, no platform is looked for: a page
// without a banner pays for this look only, not for the library's first run (its compilation
// and the rules' decoding, tens of ms). A platform is looked for where an element's id or class
// names one (or cookies, consent, a CMP), where a platform's API is defined, or where a dialog,
// banner, modal, notice or popup speaks of cookies or consent. A footer's "cookie policy" link
// alone is not enough.
const MARKED = [
  "cookie", "consent", "cmp", "gdpr", "didomi", "onetrust", "cybot", "usercentrics", "truste",
  "sp_message", "cc-window", "cc-banner", "osano", "klaro", "qc-",
  "privacy-banner", "termly", "axeptio", "borlabs", "moove_gdpr",
].map((word) => `[id*="${word}" i],[class*="${word}" i]`).join(",");
const OVERLAYS = 'dialog,[role="dialog"],[role="alertdialog"],[aria-modal="true"],[id*="banner" i],'
  + '[class*="banner" i],[class*="modal" i],[class*="popup" i],[id*="popup" i],[class*="notice" i]';
const SPEAKS = /cookie|consent|gdpr|privacy|datenschutz|einwillig/i;
const API = ["__tcfapi", "__cmp", "__uspapi", "Cookiebot", "OneTrust", "Didomi", "UC_UI"];
const mayAsk = () =>
  API.some((name) => name in window) ||
  !!document.querySelector(MARKED) ||
  Array.from(document.querySelectorAll(OVERLAYS)).some((el) => SPEAKS.test(el.textContent || ""));
const answer = async (mode, rulesJson, mostMs) => {
  if (!mayAsk()) return [null, null];
  const rules = JSON.parse(rulesJson || COMPACT_RULES);
  const module = { exports: {} };
  (function (module, exports) {
    /*LIBRARY*/
  })(module, module.exports);
  const { default: AutoConsent, filterCompactRules } = module.exports;
  const top = window.top === window;
  const bundle =
    mode === "accept"
      ? { autoconsent: rules }
      : { autoconsent: [], compact: filterCompactRules(rules, { url: location.href, mainFrame: top }) };
  const seen = [];
  let answered;
  const result = new Promise((resolve) => {
    answered = resolve;
  });
  const consent = new AutoConsent((message) => {
    if (message.type !== "report") seen.push(message);
    if (message.type === "optOutResult" || message.type === "optInResult") answered();
    return Promise.resolve();
  });
  // Detection is run below, once; a popup that a platform detected is looked for briefly.
  consent.start = () => {};
  consent.waitForPopup = (cmp) => AutoConsent.prototype.waitForPopup.call(consent, cmp, 2, 200);
  const quiet = { lifecycle: false, rulesteps: false, detectionsteps: false, evals: false, errors: false, messages: false, waits: false };
  consent.initialize(
    {
      autoAction: mode === "accept" ? "optIn" : "optOut",
      enablePrehide: false,
      detectRetries: 0,
      isMainWorld: true,
      enableCosmeticRules: true,
      logs: quiet,
    },
    bundle,
  );
  let timer;
  const late = new Promise((resolve) => {
    timer = setTimeout(resolve, mostMs);
  });
  try {
    // The platform is answered after its detection ends (not awaited by it): its result is awaited.
    await Promise.race([consent._start(), late]);
    if (seen.some((m) => m.type === "popupFound")) await Promise.race([result, late]);
  } catch (e) {
    // a rule that threw: judged below by what was seen
  }
  clearTimeout(timer);
  const popup = seen.find((m) => m.type === "popupFound");
  if (!popup) return [null, null];
  const done = seen.find((m) => m.type === "autoconsentDone");
  if (done && !done.isCosmetic) return [mode === "accept" ? "accepted" : "rejected", popup.cmp];
  if (!done) {
    // No reject (or accept) could be clicked: what the platform's rule knows of its popup goes.
    const selectors = (consent.foundCmp && consent.foundCmp.prehideSelectors) || [];
    for (const selector of selectors) {
      try {
        document.querySelectorAll(selector).forEach((el) => el.remove());
      } catch (e) {
        // a selector this browser cannot read
      }
    }
  }
  return ["removed", popup.cmp];
};
Object.defineProperty(window, "__siftConsent", { value: answer });
})();
