// A message (ul.messages) stays until its reader dismisses it: the × removes it, nothing else does.
document.addEventListener("click", (event) => {
  const button = event.target.closest("ul.messages button.dismiss");
  if (button) button.closest("li").remove();
});
