// Renders the signed-in OpenAPI schema with the vendored Redoc (no inline script: the page's CSP forbids it).
(function () {
  const element = document.getElementById("redoc");
  Redoc.init(element.dataset.specUrl, { hideDownloadButton: false, expandResponses: "200,201" }, element);
})();
