// Run by fetch/render/visibility.py in an isolated world of the rendered page, once it is ready:
// the page's own scripts share its DOM but none of its objects, so a page that replaces
// setAttribute, checkVisibility or getComputedStyle changes nothing here. Returns the page's HTML
// as page.content() gives it, serialized here without touching the DOM (no script of the page
// runs meanwhile, not even a custom element's callback), with data-sift-hidden on the outermost
// elements whose computed style hides them from a reader, which fetch/html/hidden.py drops; the
// page's own data-sift-hidden attributes are left out.
//
// Hidden: not displayed or not visible (checkVisibility); a font under 1 px; a text-indent of
// 1000 px or more back; clipped to nothing (clip-path, or the clip of a positioned element);
// laid out wholly before the page's start (a translate, a margin, an offset), where no scrolling
// reaches; shrunk to nothing by a transform that no animation is changing; own text in a
// transparent colour or the colour of the nearest background behind it (the white canvas when
// there is none; never over an image). An element is marked only when everything inside it is
// hidden too (a child may be visible again); a box of at most 1 px that clips its overflow hides
// all it holds. opacity is not looked at: pages fade their text in. What a reader opens with a
// click is never hidden: a <details>, and what a visible control names (aria-controls, a tab's
// panel by its aria-labelledby).
(() => {
  const MARK = "data-sift-hidden";
  const OFF_SCREEN_PX = 1000, TINY_FONT_PX = 1, NOTHING_PX = 1, SAME_COLOUR = 8;
  // Never text a reader sees, hidden or not: never marked, but no reason to keep a parent.
  const NOT_TEXT = new Set(["SCRIPT", "STYLE", "LINK", "META", "TEMPLATE", "NOSCRIPT"]);
  const CONTROL = "button, summary, a[href], [aria-expanded], [role=button], [role=tab]";
  const VISIBLE = {visibilityProperty: true, checkVisibilityCSS: true};
  const hasArea = (element) => {
    const box = element.getBoundingClientRect();
    return box.width > 0 && box.height > 0;
  };
  // A control a reader sees and can click, with a label.
  const visibleControl = (control) =>
    control.matches(CONTROL) && control.checkVisibility(VISIBLE) && hasArea(control) &&
    Boolean(control.textContent.trim() || control.getAttribute("aria-label") || control.getAttribute("title") ||
      control.querySelector("img, svg"));
  const controlled = new Set();
  for (const control of document.querySelectorAll("[aria-controls]")) {
    if (!visibleControl(control)) continue;
    for (const id of control.getAttribute("aria-controls").split(/\s+/)) if (id) controlled.add(id);
  }
  for (const panel of document.querySelectorAll("[aria-labelledby][id]")) {
    for (const id of panel.getAttribute("aria-labelledby").split(/\s+/)) {
      const tab = id ? document.getElementById(id) : null;
      if (tab && visibleControl(tab)) controlled.add(panel.id);
    }
  }
  const opens = (element) => {
    for (let node = element; node; node = node.parentElement) {
      if (node.tagName === "DETAILS" || (node.id && controlled.has(node.id))) return true;
    }
    return false;
  };
  const rgba = (value) => {
    const found = /rgba?\(([^)]*)\)/.exec(value);
    if (!found) return null;
    const parts = found[1].split(/[\s,/]+/).filter(Boolean).map(parseFloat);
    return parts.length < 3 ? null : [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
  };
  const same = (one, other) => [0, 1, 2].every((i) => Math.abs(one[i] - other[i]) <= SAME_COLOUR);
  const ownText = (element) => {
    for (let node = element.firstChild; node; node = node.nextSibling) {
      if (node.nodeType === Node.TEXT_NODE && node.data.trim()) return true;
    }
    return false;
  };
  // The colour behind an element: the nearest opaque background, the canvas when none; null
  // when it cannot be told (an image, a half-transparent colour).
  const behind = new Map();
  const background = (element) => {
    if (!element) return [255, 255, 255, 1];
    if (behind.has(element)) return behind.get(element);
    const style = getComputedStyle(element), colour = rgba(style.backgroundColor);
    let found;
    if (style.backgroundImage !== "none") found = null;
    else if (!colour || colour[3] === 0) found = background(element.parentElement);
    else found = colour[3] < 1 ? null : colour;
    behind.set(element, found);
    return found;
  };
  const colourHides = (element, style) => {
    if (!ownText(element)) return false;
    const colour = rgba(style.color);
    if (!colour) return false;
    const back = colour[3] === 0 ? null : background(element);
    return colour[3] === 0 || (back !== null && same(colour, back));
  };
  const clippedAway = (style) => {
    const inset = /^inset\(([^)]*)\)/.exec(style.clipPath);
    if (inset) {
      const sides = inset[1].split(/\s+round\s/)[0].trim().split(/\s+/);
      if (sides.every((side) => side.endsWith("%"))) {
        const [top, right = top, bottom = top, left = right] = sides.map(parseFloat);
        if (top + bottom >= 100 || left + right >= 100) return true;
      }
    }
    if (/^(circle|ellipse)\(0(px|%)?[\s)]/.test(style.clipPath)) return true;
    if ((style.position === "absolute" || style.position === "fixed") && style.clip.startsWith("rect(")) {
      const sides = style.clip.slice(5, -1).split(/[\s,]+/).map((side) => (side === "auto" ? null : parseFloat(side)));
      const [top, right, bottom, left] = sides;
      return (right !== null && right - (left || 0) <= NOTHING_PX) || (bottom !== null && bottom - (top || 0) <= NOTHING_PX);
    }
    return false;
  };
  const hiddenItself = (element) => {
    if (opens(element)) return false;
    const style = getComputedStyle(element);
    if (style.display === "contents") return false; // no box of its own; its children decide
    if (!element.checkVisibility(VISIBLE)) return true;
    if (parseFloat(style.fontSize) < TINY_FONT_PX || parseFloat(style.textIndent) <= -OFF_SCREEN_PX) return true;
    if (clippedAway(style)) return true;
    const box = element.getBoundingClientRect();
    if (box.right + window.scrollX <= 0 || box.bottom + window.scrollY <= 0) return true;
    const shrunk = box.width === 0 && box.height === 0 && style.transform !== "none";
    if (shrunk && element.getAnimations().length === 0) return true;
    return colourHides(element, style);
  };
  // A box of at most 1 px that clips its overflow hides all it holds, whatever the children say.
  const clipsAll = (element) => {
    if (opens(element)) return false;
    const style = getComputedStyle(element);
    const clips = (value) => value === "hidden" || value === "clip";
    const box = element.getBoundingClientRect();
    return (box.width <= NOTHING_PX || box.height <= NOTHING_PX) && clips(style.overflowX) && clips(style.overflowY);
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
  const marked = new Set();
  for (const element of all) {
    const parent = element.parentElement;
    if (NOT_TEXT.has(element.tagName)) continue;
    if (wholly.get(element) && !(parent && wholly.get(parent))) marked.add(element);
  }
  // The HTML serialization of the page (the doctype, then the root element), marks added.
  const VOID = new Set(["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr", "basefont", "bgsound", "frame", "keygen", "param"]);
  const RAW = new Set(["style", "script", "xmp", "iframe", "noembed", "noframes", "plaintext", "noscript"]);
  const text = (value) => value.replace(/&/g, "&amp;").replace(/\u00a0/g, "&nbsp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const attribute = (value) => value.replace(/&/g, "&amp;").replace(/\u00a0/g, "&nbsp;").replace(/"/g, "&quot;");
  const out = [];
  if (document.doctype) out.push("<!DOCTYPE " + document.doctype.name + ">");
  const stack = document.documentElement ? [[document.documentElement, false]] : [];
  while (stack.length) {
    const [node, closing] = stack.pop();
    if (closing) {
      out.push("</" + node.localName + ">");
    } else if (node.nodeType === Node.TEXT_NODE) {
      const parent = node.parentNode;
      out.push(parent && RAW.has(parent.localName) ? node.data : text(node.data));
    } else if (node.nodeType === Node.COMMENT_NODE) {
      out.push("<!--" + node.data + "-->");
    } else if (node.nodeType === Node.ELEMENT_NODE) {
      let open = "<" + node.localName;
      for (const { name, value } of node.attributes) if (name !== MARK) open += " " + name + '="' + attribute(value) + '"';
      out.push(open + (marked.has(node) ? " " + MARK + '="">' : ">"));
      if (VOID.has(node.localName)) continue;
      stack.push([node, true]);
      const children = node.localName === "template" && node.content ? node.content.childNodes : node.childNodes;
      for (let i = children.length - 1; i >= 0; i--) stack.push([children[i], false]);
    }
  }
  return out.join("");
})()
