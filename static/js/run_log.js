// Follow a run's full log: each log event from the run's socket asks the API for what follows the
// offset shown, so a reconnect or a burst never loses or repeats a line (offsets are the node's bytes).
(function () {
  const log = document.getElementById("full-log");
  if (!log || !("follow" in log.dataset)) return;
  const follow = document.getElementById("log-follow");
  let offset = Number(log.dataset.offset);
  let reading = null;
  let again = false;

  async function readMore() {
    if (reading) { again = true; return; }
    reading = (async () => {
      do {
        again = false;
        const url = `${log.dataset.sinceUrl}?attempt=${log.dataset.attempt}&offset=${offset}`;
        const response = await fetch(url, { credentials: "same-origin" });
        if (!response.ok) break;
        const answer = await response.json();
        if (answer.text) {
          log.append(answer.text);
          document.getElementById("log-empty")?.remove();
        }
        offset = answer.next_offset;
        if (follow.checked) log.scrollTop = log.scrollHeight;
        if (answer.more) again = true;
      } while (again);
    })();
    try { await reading; } finally { reading = null; }
  }

  let pending = null;
  window.liveSocket(`/ws/runs/${log.dataset.runId}/`, {
    onOpen: readMore,
    onMessage(message) {
      if (message.type !== "log" && message.type !== "event") return;
      clearTimeout(pending);
      pending = setTimeout(readMore, 200);
    },
  });
  if (follow.checked) log.scrollTop = log.scrollHeight;
})();
