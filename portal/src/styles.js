// xterm.js's DOM renderer writes its computed styles (theme colours, cell dimensions, the
// scrollbar) into <style> elements, which the portal's Content-Security-Policy
// (`style-src 'self'`, nothing inline) rightly refuses. This mirrors the text of every <style>
// under `root` into a constructed stylesheet adopted by the document — constructed sheets are
// not inline markup, so the policy stays strict and the terminal renders as intended.
// Answers a function that stops mirroring and drops the sheets.
export function mirrorInlineStyles(root) {
  const sheets = new Map();
  const sync = () => {
    for (const el of root.querySelectorAll('style')) {
      let sheet = sheets.get(el);
      if (!sheet) {
        sheet = new CSSStyleSheet();
        sheets.set(el, sheet);
        document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
      }
      try {
        sheet.replaceSync(el.textContent || '');
      } catch (_) {
        // a rule this browser cannot parse: keep the previous one
      }
    }
  };
  const observer = new MutationObserver(sync);
  observer.observe(root, { subtree: true, childList: true, characterData: true });
  sync();
  return () => {
    observer.disconnect();
    const ours = new Set(sheets.values());
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => !ours.has(s));
  };
}
