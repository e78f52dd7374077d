// Run in a rendered page just before its DOM is read (render_child.py): every element whose
// computed style hides it from a reader, with all it holds, gets the attribute
// data-sift-hidden, which fetch/html/hidden.py drops. Hidden means not displayed or not visible
// (checkVisibility), a font size of 0, or laid out wholly before the page's start (off-screen),
// where no scrolling reaches; such an element is marked only when everything inside it is hidden
// too (a child may be visible again). A box of no area that clips its overflow hides all it
// holds. opacity is not looked at: pages fade their text in. What a reader opens with a click
// is never hidden: a <details>, a tab's panel, the panel a control names in aria-controls.
(() => {
  const MARK = "data-sift-hidden";
  for (const marked of document.querySelectorAll("[" + MARK + "]")) marked.removeAttribute(MARK);
  // Never text a reader sees, hidden or not: never marked, but no reason to keep a parent.
  const NOT_TEXT = new Set(["SCRIPT", "STYLE", "LINK", "META", "TEMPLATE", "NOSCRIPT"]);
  // What a reader opens with a click: a <details>, a tab's panel, what a control names.
  const controlled = new Set();
  for (const control of document.querySelectorAll("[aria-controls]")) {
    for (const id of control.getAttribute("aria-controls").split(/\s+/)) if (id) controlled.add(id);
  }
  const opens = (element) => {
    for (let node = element; node; node = node.parentElement) {
      if (node.tagName === "DETAILS" || node.getAttribute("role") === "tabpanel" || controlled.has(node.id)) return true;
    }
    return false;
  };
  const hiddenItself = (element) => {
    if (opens(element)) return false;
    const style = getComputedStyle(element);
    if (style.display === "contents") return false; // no box of its own; its children decide
    if (!element.checkVisibility({ visibilityProperty: true, checkVisibilityCSS: true })) return true;
    if (parseFloat(style.fontSize) === 0) return true;
    const box = element.getBoundingClientRect();
    return box.right + window.scrollX <= 0 || box.bottom + window.scrollY <= 0;
  };
  // A box of no area that clips its overflow hides all it holds, whatever the children say.
  const clipsAll = (element) => {
    if (opens(element)) return false;
    const style = getComputedStyle(element);
    const clips = (value) => value === "hidden" || value === "clip";
    const box = element.getBoundingClientRect();
    return (box.width === 0 || box.height === 0) && clips(style.overflowX) && clips(style.overflowY);
  };
  // Children first: an element is wholly hidden when it is, and each of its children is.
  const wholly = new Map();
  const all = Array.from(document.body ? document.body.querySelectorAll("*") : []);
  for (let i = all.length - 1; i >= 0; i--) {
    const element = all[i];
    if (!NOT_TEXT.has(element.tagName) && clipsAll(element)) {
      wholly.set(element, true);
      continue;
    }
    let hidden = NOT_TEXT.has(element.tagName) || hiddenItself(element);
    for (let child = element.firstElementChild; hidden && child; child = child.nextElementSibling) {
      hidden = wholly.get(child) === true;
    }
    wholly.set(element, hidden);
  }
  for (const element of all) {
    const parent = element.parentElement;
    if (NOT_TEXT.has(element.tagName)) continue;
    if (wholly.get(element) && !(parent && wholly.get(parent))) element.setAttribute(MARK, "");
  }
})();
