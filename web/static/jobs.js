/* The jobs list: rows update (and new jobs appear) live from /ws/events. */
"use strict";

(function () {
  const N = window.Nova;
  const table = document.getElementById("jobs");
  const template = document.getElementById("job-row-template");
  if (!table || !template) return;
  const body = table.tBodies[0];

  function rowFor(jobId) {
    for (const row of body.rows) if (row.dataset.job === jobId) return row;
    const row = template.content.firstElementChild.cloneNode(true);
    row.dataset.job = jobId;
    row.querySelector('[data-f="link"]').setAttribute("href", "/jobs/" + encodeURIComponent(jobId));
    body.prepend(row);
    const empty = document.getElementById("no-jobs");
    if (empty) empty.hidden = true;
    return row;
  }

  N.live({
    ws: "/ws/events",
    poll: "/api/live/events",
    after: table.dataset.lastId,
    onMessage(msg) {
      const jobs = (msg.jobs || []).slice().reverse();  // oldest first, so newest ends on top
      for (const job of jobs) {
        const row = rowFor(job.job_id);
        row.className = "job-row state-" + String(job.tone).replace(/[^a-z_]/g, "");
        N.fillFields(row, job);
      }
    },
  });
})();
