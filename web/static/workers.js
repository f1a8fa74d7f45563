/* The workers page: re-rendered from /api/live/workers when events arrive (and every 5 s). */
"use strict";

(function () {
  const N = window.Nova;
  const fleet = document.getElementById("fleet");
  const warnings = document.getElementById("warnings");
  if (!fleet || !warnings) return;
  const source = warnings.dataset.source;
  const el = N.el;
  const cls = (s) => String(s).replace(/[^a-z_-]/g, "");

  function kv(pairs) {
    const dl = el("dl", {class: "kv"});
    for (const [k, v, extra] of pairs) {
      dl.appendChild(el("dt", {text: k}));
      dl.appendChild(el("dd", {text: v, class: extra || null}));
    }
    return dl;
  }

  function speeds(rows) {
    if (!rows.length) return null;
    const head = el("tr", {}, ["app", "bench", "avg", "compile", "load", "done"]
      .map((h) => el("th", {text: h})));
    const body = el("tbody", {}, rows.map((s) => el("tr", {}, [
      s.app, s.benchmark_text, s.ema_text, s.compile_text, s.load_text, s.done,
    ].map((v) => el("td", {text: v})))));
    return el("table", {class: "speeds"}, [el("thead", {}, [head]), body]);
  }

  function worker(w) {
    return el("article", {class: "worker state-" + cls(w.state) + (w.alive ? "" : " gone")}, [
      el("header", {}, [
        el("strong", {text: w.name}),
        el("span", {class: "badge backend backend-" + cls(w.backend_class), text: w.backend_label}),
        el("span", {class: "pill state", text: w.state}),
        w.quarantined ? el("span", {class: "pill quarantined", text: "quarantined"}) : null,
      ]),
      w.quarantine_text ? el("p", {class: "alert warn quarantine", text: w.quarantine_text}) : null,
      ...(w.cannot_run_texts || []).map((t) => el("p", {class: "alert warn cannot-run", text: t})),
      kv([["device", w.device || "–"], ["memory", w.memory_text],
          ["current", w.current_text, "mono"],
          ["done / failed / OOM", w.tasks_done + " / " + w.failures + " / " + w.oom],
          ["heartbeat", w.heartbeat_text], ["labels", w.labels_text, "mono"],
          ["token", w.token_text, "mono"], ["trust", w.trust_text],
          ["price", w.price_text],
          ["warm", w.warm_text, "mono"], ["id", w.id, "mono"]]),
      speeds(w.speed_rows),
    ]);
  }

  function render(view) {
    warnings.replaceChildren(...view.warnings.map((w) =>
      el("p", {class: "alert warn", role: "alert", text: w.text})));
    if (!view.groups.length) {
      fleet.replaceChildren(el("p", {class: "empty muted", text: "No workers have registered."}));
      return;
    }
    fleet.replaceChildren(...view.groups.map((g) => el("section", {class: "panel host"}, [
      el("h2", {}, [
        document.createTextNode(N.visibleBidi(g.host || "unknown host") + " "),
        el("small", {class: "mono muted", text: g.host_id}),
        el("span", {class: "pill", text: g.alive + " live"}),
      ]),
      el("div", {class: "workers"}, g.workers.map(worker)),
    ])));
  }

  let pending = null;
  function refresh() {
    if (pending) return;
    pending = setTimeout(() => {
      fetch(source, {headers: {Accept: "application/json"}})
        .then((r) => (r.ok ? r.json() : Promise.reject(new Error("HTTP " + r.status))))
        .then(render)
        .catch(() => N.status("offline", "offline"))
        .finally(() => { pending = null; });
    }, 300);
  }

  N.live({ws: "/ws/events", poll: "/api/live/events", after: "", onMessage: refresh});
  setInterval(refresh, 5000);
})();
