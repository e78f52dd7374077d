// Runs in every frame before the page's scripts (render_server.py, READY_SCRIPT): keeps what the
// render process asks before it reads the page (docs/rendering.md, "When a page is ready"):
// when the DOM last changed, and how many things the page still waits for that may change it:
// fetch() and XHR (a fetch until its body is read), short timers (up to 1 s), animation frames,
// scripts and stylesheets it added that have not loaded. What a chain of three or more timers or
// frames sets, and what a setInterval callback asks, is polling or animation: not counted. Also
// takes SharedWorker away (its requests would escape routing). The DOM is read elsewhere, in a
// world the page cannot reach (visibility.py).
(() => {
  if (window.__siftReady) return;
  const state = {changed: performance.now(), timers: 0, requests: 0, frames: 0, loading: 0};
  const Waiting = Promise, now = performance.now.bind(performance);
  Object.defineProperty(window, "__siftReady", {value: state});
  try { Object.defineProperty(window, "SharedWorker", {value: undefined, configurable: false}); } catch (e) {}
  const changed = () => { state.changed = now(); };
  window.addEventListener("load", changed);  // the quiet window starts at load at the earliest
  // A script or stylesheet the page adds runs or applies only once loaded (its request may be
  // answered already): counted until its load or error event.
  const JAVASCRIPT = /^\s*(module|(text|application)\/(x-)?(java|ecma|j|live)script(1\.[0-5])?)?\s*$/i;
  const watched = new WeakSet();  // a node moved in again loads no more
  const loads = (node) => {
    if (watched.has(node)) return false;
    if (node instanceof HTMLScriptElement) return node.src !== "" && !node.noModule && JAVASCRIPT.test(node.type);
    if (node instanceof HTMLLinkElement) return node.href !== "" && !node.disabled && node.relList.contains("stylesheet") && !node.relList.contains("alternate");
    return false;
  };
  const watch = (node) => {
    if (!loads(node)) return;
    watched.add(node);
    state.loading++;
    const done = () => { node.removeEventListener("load", done); node.removeEventListener("error", done); state.loading--; changed(); };
    node.addEventListener("load", done);
    node.addEventListener("error", done);
  };
  const note = (records) => {
    changed();
    for (const record of records) for (const node of record.addedNodes) watch(node);
  };
  const observer = new MutationObserver(note);
  observer.observe(document, {subtree: true, childList: true, characterData: true});
  const settled = () => { state.requests--; changed(); };
  let polling = false;  // in a setInterval callback: its requests are the page polling
  const fetch = window.fetch;
  window.fetch = function (...args) {
    if (polling) return fetch.apply(this, args);
    state.requests++;
    try { const answer = fetch.apply(this, args); answer.then(settled, settled); return answer; }
    catch (e) { settled(); throw e; }
  };
  // Reading a fetch's body is one more wait before the page writes what it got.
  for (const name of ["arrayBuffer", "blob", "formData", "json", "text"]) {
    const read = Response.prototype[name];
    Response.prototype[name] = function (...args) {
      if (polling) return read.apply(this, args);
      state.requests++;
      try { const body = read.apply(this, args); body.then(settled, settled); return body; }
      catch (e) { settled(); throw e; }
    };
  }
  const send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.send = function (...args) {
    if (polling) return send.apply(this, args);
    state.requests++;
    this.addEventListener("loadend", settled);
    try { return send.apply(this, args); }
    catch (e) { this.removeEventListener("loadend", settled); settled(); throw e; }
  };
  // Timers and animation frames: `level` is how deep in a chain of them a callback runs. A
  // callback past the third that changed the DOM is work still going on (a list written a frame
  // at a time), not animation: the short timers and frames it set are counted after all
  // (`later`, what each would need to be counted).
  let level = 0, later = null;
  const chained = (callback, mine, done) => function (...args) {
    done();
    const outer = level, wasPolling = polling, outerLater = later;
    level = mine; polling = polling || mine > 3; later = [];
    try { return callback.apply(this, args); } finally {
      const records = observer.takeRecords();
      if (records.length) { note(records); for (const count of later) count(); }
      level = outer; polling = wasPolling; later = outerLater;
    }
  };
  // Timers a chain sets past the third, and intervals, are not waited for; those due within
  // SHORT ms (`short`) make the quiet window the longer one: the page may be waiting for a
  // condition it checks that often ("is the data there yet?").
  const SHORT = 100;
  const set = window.setTimeout, clear = window.clearTimeout, live = new Set(), short = new Set();
  const run = eval;  // a timer's string runs as the browser would: code in the global scope
  window.setTimeout = function (callback, delay, ...args) {
    if (typeof callback !== "function") { const code = String(callback); callback = () => run(code); }
    const due = Number(delay) || 0, counted = due <= 1000 && level < 3;
    const fired = () => { if (live.delete(id)) state.timers--; short.delete(id); };
    const id = set.call(window, chained(callback, level + 1, fired), delay, ...args);
    if (counted) { live.add(id); state.timers++; } else if (due <= SHORT) {
      short.add(id);
      if (later) later.push(() => { if (short.has(id)) { live.add(id); state.timers++; } });
    }
    return id;
  };
  // Timeouts and intervals share their ids: either call clears either.
  const forget = (id) => { if (live.delete(id)) state.timers--; short.delete(id); };
  window.clearTimeout = function (id) { forget(id); return clear.call(window, id); };
  const every = window.setInterval, stop = window.clearInterval;
  window.clearInterval = function (id) { forget(id); return stop.call(window, id); };
  window.setInterval = function (callback, delay, ...args) {
    if (typeof callback !== "function") return every.call(window, callback, delay, ...args);
    const id = every.call(window, function () {
      polling = true;
      try { return callback.apply(this, args); } finally { polling = false; }
    }, delay);
    if ((Number(delay) || 0) <= SHORT) short.add(id);
    return id;
  };
  const frame = window.requestAnimationFrame, cancel = window.cancelAnimationFrame;
  const drawing = new Set(), unseen = new Set();
  window.requestAnimationFrame = function (callback) {
    if (typeof callback !== "function") return frame.call(window, callback);
    const counted = level < 3;
    const fired = () => { if (drawing.delete(id)) state.frames--; unseen.delete(id); };
    const id = frame.call(window, chained(callback, level + 1, fired));
    if (counted) { drawing.add(id); state.frames++; } else if (later) {
      unseen.add(id);
      later.push(() => { if (unseen.delete(id)) { drawing.add(id); state.frames++; } });
    }
    return id;
  };
  window.cancelAnimationFrame = function (id) {
    if (drawing.delete(id)) state.frames--;
    unseen.delete(id);
    return cancel.call(window, id);
  };
  // What the render process waits on: resolves with [ms unchanged, timers and frames, requests
  // and loads, the window] once none is pending, the DOM has not changed for the window (`quiet`
  // ms, `longer` while a short timer or interval is set) and a message through a channel has
  // come back (a task the page queued before it, postMessage as schedulers use, runs first); or
  // after `most` ms. The channel and its handler are set before the page runs.
  const pending = () => [state.timers + state.frames, state.requests + state.loading];
  const hop = new MessageChannel(), post = MessagePort.prototype.postMessage;
  let hopped = null;
  hop.port1.onmessage = () => { const then = hopped; hopped = null; if (then) then(); };
  Object.defineProperty(state, "settled", {value: (quiet, longer, most) => new Waiting((resolve) => {
    const began = now();
    let done = false;
    const look = (afterHop) => {
      if (done) return;
      const [timers, requests] = pending(), unchanged = now() - state.changed, idle = timers + requests === 0;
      const wanted = short.size ? longer : quiet, still = idle && unchanged >= wanted;
      if ((still && afterHop) || now() - began >= most) {
        done = true;
        resolve([unchanged, timers, requests, wanted]);
      } else if (still) {
        hopped = () => look(true);
        post.call(hop.port2, 0);
      } else {
        set.call(window, () => look(false), idle ? Math.max(1, wanted - unchanged) : 5);
      }
    };
    set.call(window, () => look(false), most + 1);  // answers even if the message never came back
    look(false);
  })});
})();
