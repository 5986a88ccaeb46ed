// The live box page: a probe, an audit, a state change, an edit or a teardown step re-renders the
// page's state-driven parts in place (one fetch per burst of messages).
(function () {
  const root = document.getElementById("instance-live");
  if (!root) return;
  let pending = null;
  function refreshSoon() {
    clearTimeout(pending);
    pending = setTimeout(window.swapLiveFragments, 250);
  }
  window.liveSocket(`/ws/instances/${root.dataset.instance}/`, { onOpen: refreshSoon, onMessage: refreshSoon });
})();
