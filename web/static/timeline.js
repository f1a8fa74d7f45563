/* The job timeline: one lane per worker, one bar per attempt, from /api/jobs/<id>/timeline.
 * Bars are placed by the server (left_pct, width_pct, css, label); text goes through
 * textContent (Nova.el). Refreshed every 2 s while the job runs, once more when it ends. */
"use strict";

(function () {
  const N = window.Nova;
  const box = document.getElementById("lanes");
  const head = document.getElementById("job");
  if (!box || !head) return;
  const url = "/api/jobs/" + encodeURIComponent(box.dataset.job) + "/timeline";

  function render(tl) {
    const rows = tl.lanes.map((lane) => {
      const bars = lane.bars.map((b) => {
        const bar = N.el("span", {class: "bar " + String(b.css).replace(/[^a-z -]/g, ""),
                                  title: b.label, role: "img", "aria-label": b.label,
                                  "data-task": b.task, "data-outcome": b.outcome});
        bar.style.left = Number(b.left_pct) + "%";
        bar.style.width = Number(b.width_pct) + "%";
        return bar;
      });
      return N.el("div", {class: "lane", "data-worker": lane.worker_id}, [
        N.el("span", {class: "lane-name", text: lane.title, title: lane.worker_id}),
        N.el("span", {class: "lane-track"}, bars),
      ]);
    });
    const foot = N.el("p", {class: "muted lanes-foot",
                            text: (tl.lanes.length ? "0 s … " + tl.span_text : "no attempt yet")
                                  + (tl.note ? " · " + tl.note : "")});
    box.replaceChildren(...rows, foot);
  }

  let final = false;
  function refresh() {
    fetch(url, {headers: {Accept: "application/json"}})
      .then((r) => (r.ok ? r.json() : Promise.reject(new Error("HTTP " + r.status))))
      .then(render)
      .catch((err) => console.error("nova timeline", err))
      .finally(() => {
        // head.dataset.state follows the live feed (gallery.js)
        if (!["done", "failed", "cancelled"].includes(head.dataset.state)) setTimeout(refresh, 2000);
        else if (!final) { final = true; setTimeout(refresh, 500); }
      });
  }
  refresh();
})();
