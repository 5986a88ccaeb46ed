// A rent that waits on a worker (approved, creating, booting, or registered while its host key is being
// scanned): ask the API every two seconds and show the page for its next step as soon as there is one.
(function () {
  const marker = document.getElementById("rental");
  if (!marker || marker.dataset.waiting !== "yes") return;
  const url = marker.dataset.api;
  const shown = marker.dataset.state + "|" + (marker.dataset.seen || "");
  async function poll() {
    try {
      const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (response.ok) {
        const rent = await response.json();
        if (rent.state + "|" + (rent.host_key_seen || "") !== shown) {
          window.location.reload();
          return;
        }
      }
    } catch (error) {
      // A dropped request is asked again at the next beat; the page says what it waits for meanwhile.
    }
    setTimeout(poll, 2000);
  }
  setTimeout(poll, 2000);
})();
