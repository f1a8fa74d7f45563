/* nova-queue web: shared helpers for live pages.
 *
 * Rules: user text reaches the DOM through textContent only (setText), never innerHTML;
 * bidi control characters are shown as visible markers, as the server does (web/text.py).
 *
 * Live protocol: a WebSocket sends a snapshot, then deltas; each message has last_id, the
 * newest event it accounts for. On reconnect the client sends ?after=<last_id> and gets
 * what it missed. If the socket cannot connect, the same messages are polled over HTTP.
 */
"use strict";

window.Nova = (function () {
  const BIDI = /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/g;

  function visibleBidi(value) {
    return String(value).replace(BIDI, (c) =>
      "\u27eaU+" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0") + "\u27eb");
  }

  function setText(node, value) {
    node.textContent = visibleBidi(value === null || value === undefined ? "" : value);
  }

  /* Only app-relative URLs (and http(s) ones for presigned results) become src/href. */
  function safeUrl(url) {
    return typeof url === "string" && (/^\/(?!\/)/.test(url) || /^https?:\/\//i.test(url));
  }

  /* el("span", {class: "tag", text: "x"}, [children]) — text goes through setText. */
  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") setText(node, value);
      else if (key === "class") node.className = value;
      else if ((key === "href" || key === "src") && !safeUrl(value)) continue;
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children || []) if (child) node.appendChild(child);
    return node;
  }

  /* Fill every [data-f] under root from data[field]; empty optional fields are hidden. */
  function fillFields(root, data) {
    root.querySelectorAll("[data-f]").forEach((node) => {
      const field = node.dataset.f;
      if (!(field in data)) return;
      const value = data[field];
      if (node.tagName === "PROGRESS") {
        node.value = Number(value) || 0;
      } else if (node.tagName === "A") {
        return;
      } else {
        setText(node, value);
        node.hidden = value === "" || value === null || value === undefined;
      }
    });
  }

  function eventItem(e) {
    return el("li", {class: "ev ev-" + String(e.type).replace(/[^a-z_]/g, ""), "data-id": e.key}, [
      el("time", {datetime: e.iso_time, text: e.time_text}),
      el("span", {class: "ev-type", text: e.type}),
      el("span", {class: "ev-text", text: e.text}),
    ]);
  }

  /* Add events not shown yet; newest-first lists prepend, others append. */
  function addEvents(list, events, limit) {
    const seen = new Set(Array.from(list.children, (li) => li.dataset.id));
    const newestFirst = list.dataset.order === "newest-first";
    for (const e of events || []) {
      if (seen.has(e.key)) continue;
      seen.add(e.key);
      const item = eventItem(e);
      item.classList.add("fresh");
      if (newestFirst) list.prepend(item); else list.appendChild(item);
    }
    while (list.children.length > (limit || 500)) {
      (newestFirst ? list.lastElementChild : list.firstElementChild).remove();
    }
  }

  function status(state, text) {
    const node = document.getElementById("live-status");
    if (!node) return;
    node.dataset.state = state;
    setText(node, text || state);
  }

  /* Connect to a live feed: opts = {ws, poll, after, params, onMessage}. */
  function live(opts) {
    let after = opts.after || "";
    let failures = 0;
    let pollTimer = null;

    function query() {
      const q = new URLSearchParams(opts.params || {});
      if (after) q.set("after", after);
      const s = q.toString();
      return s ? "?" + s : "";
    }

    function handle(msg) {
      if (msg.type === "error") { status("error", msg.message); return false; }
      if (msg.last_id) after = msg.last_id;
      opts.onMessage(msg);
      return true;
    }

    function connect() {
      const proto = location.protocol === "https:" ? "wss://" : "ws://";
      let ws;
      try {
        ws = new WebSocket(proto + location.host + opts.ws + query());
      } catch (err) {
        startPolling();
        return;
      }
      let received = false;
      let broken = false;
      status("connecting", "connecting…");
      ws.onopen = () => status("live", "live");
      ws.onmessage = (ev) => {
        if (!received) { received = true; failures = 0; }
        try { if (!handle(JSON.parse(ev.data))) broken = true; }
        catch (err) { console.error("nova live message", err); }
      };
      ws.onclose = () => {
        if (broken) return;  // the server gave a final answer (e.g. unknown job)
        if (!received) failures += 1;  // refused, or closed before its first message
        if (failures >= 3) { startPolling(); return; }
        status("reconnecting", "reconnecting…");
        setTimeout(connect, Math.min(1000 * 2 ** failures, 10000));
      };
    }

    function startPolling() {
      status("polling", "polling");
      if (pollTimer) return;
      let rounds = 0;
      const poll = () => {
        fetch(opts.poll + query(), {headers: {Accept: "application/json"}})
          .then((r) => (r.ok ? r.json() : Promise.reject(new Error("HTTP " + r.status))))
          .then((msg) => { handle(msg); status("polling", "polling"); })
          .catch(() => status("offline", "offline"))
          .finally(() => {
            rounds += 1;
            if (sockets && rounds % 15 === 0) {  // every ~30 s, try the socket again
              pollTimer = null; failures = 2; connect();
            } else {
              pollTimer = setTimeout(poll, 2000);
            }
          });
      };
      pollTimer = setTimeout(poll, 0);
    }

    // a gallery with a web token opens live sockets only for unlocked sessions
    const sockets = "WebSocket" in window && document.body.dataset.sockets !== "off";
    if (sockets) connect(); else startPolling();
  }

  return {visibleBidi, setText, safeUrl, el, fillFields, eventItem, addEvents, status, live};
})();
