/** Small self-contained HTML pages of the console (the OAuth callback's answers). */
const escape = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

export function htmlPage(title: string, paragraphs: readonly string[]): string {
  const body = paragraphs.map((p) => `<p>${escape(p)}</p>`).join('\n');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>${escape(title)}</title></head>
<body style="font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;line-height:1.5"><h1>${escape(title)}</h1>
${body}
</body></html>`;
}
