// The console's only script: the copy button of a newly created key. Everything else works without script.
document.addEventListener('click', async (event) => {
  const button = event.target.closest('button[data-copy]');
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  const status = document.getElementById(`${button.dataset.copy}-status`);
  try {
    await navigator.clipboard.writeText(source.textContent.trim());
    if (status) status.textContent = 'Copied to the clipboard.';
  } catch {
    // Clipboard refused (e.g. not a secure context): select the text so the user can copy it by hand.
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    if (status) status.textContent = 'Selected: press Ctrl+C (or Cmd+C) to copy.';
  }
});
