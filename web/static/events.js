/* The events page: new events are prepended live from /ws/events. */
"use strict";

(function () {
  const N = window.Nova;
  const list = document.getElementById("timeline");
  if (!list) return;
  const params = list.dataset.job ? {job: list.dataset.job} : {};
  N.live({
    ws: "/ws/events",
    poll: "/api/live/events",
    after: list.dataset.lastId,
    params,
    onMessage(msg) {
      N.addEvents(list, msg.events, 1000);
      const empty = list.parentElement.querySelector(".empty");
      if (empty && list.children.length) empty.hidden = true;
    },
  });
})();
