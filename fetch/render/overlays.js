// Removes what covers the viewport of a rendered page (fetch/render/consent.py): a modal, its
// backdrop, a wall that withholds the article it covers. Looked for where a person looks: the
// topmost element at points across the viewport, climbed to its outermost fixed or sticky box;
// a box covering half the viewport or more goes when it holds a small part of the page's text
// (an app whose whole layout is one fixed box keeps it). Scrolling locked for the modal is
// unlocked. Answers [boxes removed, whether one of them spoke of cookies or consent].
() => {
  const width = window.innerWidth;
  const height = window.innerHeight;
  const body = document.body;
  if (!body || width === 0 || height === 0) return [0, false];
  const pageText = (body.innerText || "").length;
  const points = [[0.5, 0.5], [0.2, 0.2], [0.8, 0.2], [0.2, 0.8], [0.8, 0.8], [0.5, 0.1], [0.5, 0.9]];
  const boxes = new Set();
  for (const [x, y] of points) {
    let fixed = null;
    for (let node = document.elementFromPoint(width * x, height * y); node && node !== body && node !== document.documentElement; node = node.parentElement) {
      const position = getComputedStyle(node).position;
      if (position === "fixed" || position === "sticky") fixed = node;
    }
    if (fixed) boxes.add(fixed);
  }
  let removed = 0;
  let consent = false;
  for (const box of boxes) {
    const r = box.getBoundingClientRect();
    const covered = Math.max(0, Math.min(r.right, width) - Math.max(r.left, 0)) * Math.max(0, Math.min(r.bottom, height) - Math.max(r.top, 0));
    const text = box.innerText || "";
    if (covered < 0.5 * width * height || text.length > 0.5 * pageText) continue;
    consent = consent || /cookie|consent|gdpr|privacy|datenschutz|einwillig/i.test(text);
    box.remove();
    removed += 1;
  }
  if (removed) {
    for (const node of [document.documentElement, body]) {
      if (getComputedStyle(node).overflowY === "hidden") node.style.setProperty("overflow", "visible", "important");
    }
  }
  return [removed, consent];
}
