/* The job gallery: fills the grid live from /ws/jobs/<id>. */
"use strict";

(function () {
  const N = window.Nova;
  const head = document.getElementById("job");
  const grid = document.getElementById("grid");
  const timeline = document.getElementById("timeline");
  if (!head || !grid) return;

  function placeholder() {
    return N.el("span", {class: "placeholder"}, [
      N.el("span", {class: "ph-state", "data-f": "state"}),
      N.el("span", {class: "ph-owner", "data-f": "owner_text"}),
    ]);
  }

  function updateCard(card, t) {
    card.className = "card state-" + String(t.state).replace(/[^a-z_]/g, "");
    const thumb = card.querySelector(".thumb");
    const img = thumb.querySelector("img");
    if (t.image_url && N.safeUrl(t.image_url)) {
      if (!img || img.getAttribute("src") !== t.image_url) {
        const fresh = N.el("img", {src: t.image_url, alt: N.visibleBidi(t.prompt),
                                   decoding: "async"});
        thumb.replaceChildren(fresh);
      }
    } else if (!thumb.querySelector(".placeholder")) {
      thumb.replaceChildren(placeholder());
    }
    N.fillFields(card, t);
    const badge = card.querySelector('[data-f="backend_label"]');
    if (badge) badge.className = "badge backend backend-" + String(t.backend_class).replace(/[^a-z]/g, "");
  }

  function applyTask(t) {
    const card = document.getElementById("task-" + Number(t.index));
    if (card) updateCard(card, t);
  }

  N.live({
    ws: "/ws/jobs/" + encodeURIComponent(head.dataset.job),
    poll: "/api/live/jobs/" + encodeURIComponent(head.dataset.job),
    after: head.dataset.lastId,
    params: {start: head.dataset.start || "0"},
    onMessage(msg) {
      if (msg.job) {
        N.fillFields(head, msg.job);
        head.dataset.state = msg.job.state;
        head.dataset.tone = msg.job.tone;
      }
      (msg.tasks || []).forEach(applyTask);
      if (timeline) N.addEvents(timeline, msg.events, 500);
      document.body.dataset.lastId = msg.last_id || "";
    },
  });
})();
