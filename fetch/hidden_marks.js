// Run in a rendered page just before its DOM is read (render_child.py): every element whose
// computed style hides it from a reader, with all it holds, gets the attribute
// data-sift-hidden, which fetch/hidden.py drops. Hidden means not displayed or not visible
// (checkVisibility), a font size of 0, no area with its overflow clipped, or laid out wholly
// before the page's start (off-screen), where no scrolling reaches. An element is marked only
// when everything inside it is hidden too (a visible child of a hidden parent stays). opacity
// is not looked at: pages fade their text in. <details> is never hidden: a reader opens it.
(() => {
  const MARK = "data-sift-hidden";
  for (const marked of document.querySelectorAll("[" + MARK + "]")) marked.removeAttribute(MARK);
  // Never text a reader sees, hidden or not: never marked, but no reason to keep a parent.
  const NOT_TEXT = new Set(["SCRIPT", "STYLE", "LINK", "META", "TEMPLATE", "NOSCRIPT"]);
  const hiddenItself = (element) => {
    if (element.closest("details")) return false;
    const style = getComputedStyle(element);
    if (style.display === "contents") return false; // no box of its own; its children decide
    if (!element.checkVisibility({ visibilityProperty: true, checkVisibilityCSS: true })) return true;
    if (parseFloat(style.fontSize) === 0) return true;
    const box = element.getBoundingClientRect();
    const clips = (value) => value === "hidden" || value === "clip";
    if ((box.width === 0 || box.height === 0) && clips(style.overflowX) && clips(style.overflowY)) return true;
    return box.right + window.scrollX <= 0 || box.bottom + window.scrollY <= 0;
  };
  // Children first: an element is wholly hidden when it is, and each of its children is.
  const wholly = new Map();
  const all = Array.from(document.body ? document.body.querySelectorAll("*") : []);
  for (let i = all.length - 1; i >= 0; i--) {
    const element = all[i];
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
