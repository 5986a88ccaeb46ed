// Every moment on a page in the reader's local time with its zone named, in one shape: the server
// writes UTC into <time data-when="style">, this rewrites it; live scripts call window.localTime.
(function () {
  const pad = (n) => String(n).padStart(2, "0");
  function zone(date) {
    const part = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" })
      .formatToParts(date)
      .find((p) => p.type === "timeZoneName");
    return part ? part.value : "";
  }
  window.localTime = function (iso, style = "minutes") {
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return "";
    const day = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
    const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
    const hms = `${hm}:${pad(d.getSeconds())}`;
    const shown = {
      minutes: `${day} ${hm}`,
      seconds: `${day} ${hms}`,
      short: `${day.slice(5)} ${hms}`,
      time: hms,
      date: day,
    }[style] ?? `${day} ${hm}`;
    return style === "date" ? shown : `${shown} ${zone(d)}`;
  };
  window.localizeTimes = function (root = document) {
    root.querySelectorAll("time[data-when]").forEach((node) => {
      node.textContent = window.localTime(node.getAttribute("datetime"), node.dataset.when);
      node.title = node.getAttribute("datetime");
    });
  };
  window.localizeTimes();
})();
