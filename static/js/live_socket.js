// A WebSocket that reconnects with backoff; onOpen runs on every (re)connect so pages re-read the DB.
window.liveSocket = function (path, handlers) {
  const status = document.getElementById("connection");
  let delay = 1000;
  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}${path}`);
    socket.onopen = () => {
      delay = 1000;
      if (status) status.textContent = "live";
      handlers.onOpen && handlers.onOpen();
    };
    socket.onmessage = (message) => handlers.onMessage(JSON.parse(message.data));
    socket.onclose = (event) => {
      if (status) status.textContent = event.code >= 4400 ? "live updates refused" : "reconnecting…";
      if (event.code >= 4400) return;
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 15000);
    };
  }
  connect();
};

// State-driven parts of a page (buttons, panels) are server-rendered: on a change, fetch the page
// once and swap every element marked data-live-fragment for its fresh copy (one mechanism, every page).
window.swapLiveFragments = async function () {
  const response = await fetch(window.location.pathname + window.location.search, { credentials: "same-origin" });
  if (!response.ok) return;
  const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
  const typing = document.activeElement?.matches("input:not([type=hidden]), textarea, select") ? document.activeElement : null;
  document.querySelectorAll("[data-live-fragment][id]").forEach((current) => {
    // A part holding what someone is typing, or a form they changed and have not sent, keeps it: it is
    // refreshed on the next change after (a swap between choosing "running" and clicking "Record state"
    // once sent the form's default instead).
    if ((typing && current.contains(typing)) || edited(current)) return;
    const next = fresh.getElementById(current.id);
    if (next) current.replaceWith(document.importNode(next, true));
    // A transient part (a "queued" notice) absent from the fresh page is stale: what it announced happened.
    else if (current.dataset.liveFragment === "transient") current.remove();
  });
  window.localizeTimes?.();
};

// Whether a field inside part holds something other than what the page was served with.
function edited(part) {
  return [...part.querySelectorAll("input:not([type=hidden]), textarea, select")].some((field) => {
    if (field.tagName === "SELECT") return [...field.options].some((option) => option.selected !== option.defaultSelected);
    if (field.type === "checkbox" || field.type === "radio") return field.checked !== field.defaultChecked;
    return field.value !== field.defaultValue;
  });
}
