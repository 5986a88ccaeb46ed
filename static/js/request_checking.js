// A filed teardown request while its proofs are gathered on the box: ask the API for its status
// every two seconds and show the page for its next state as soon as it has one.
(function () {
  const marker = document.getElementById("checking");
  if (!marker) return;
  const url = marker.dataset.api;
  async function poll() {
    try {
      const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (response.ok && (await response.json()).status !== "checking") {
        window.location.reload();
        return;
      }
    } catch (error) {
      // A dropped request is asked again at the next beat; the page says it is checking meanwhile.
    }
    setTimeout(poll, 2000);
  }
  setTimeout(poll, 2000);
})();
