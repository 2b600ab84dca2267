// A session's terminal in the page: xterm.js draws what the sandbox's PTY
// shows and sends what is typed. Loaded with the first terminal opened
// (xterm.js is a chunk of its own).
import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";
import { call, describe, type Session } from "./api.ts";

// xterm.js adds <style> elements of its own (its theme, the cell size);
// the page's CSP applies a style element only with the answer's nonce,
// which CodeMirror is given as an option and xterm.js has none for. So
// every style element made in this page gets the nonce.
const nonce = document.querySelector<HTMLMetaElement>('meta[name="csp-nonce"]')?.content ?? "";
const createElement = Document.prototype.createElement;
Document.prototype.createElement = function (this: Document, tag: string, opts?: ElementCreationOptions) {
  const el = createElement.call(this, tag, opts);
  if (el instanceof HTMLStyleElement) el.nonce = nonce;
  return el;
} as typeof Document.prototype.createElement;

/** Runs /bin/sh on a new terminal of s drawn in box; status says how it
 * ends. The returned function closes it (its program killed). */
export async function openTerminal(s: Session, box: HTMLElement, status: (text: string) => void): Promise<() => void> {
  const term = new Terminal({ fontSize: 13, convertEol: false, cursorBlink: true });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();
  let t;
  try {
    t = await call(() => s.openTerminal({ rows: term.rows, cols: term.cols }));
  } catch (e) {
    term.dispose();
    throw e;
  }
  box.dataset.terminal = t.id;
  const stop = new AbortController();
  // Keystrokes go in order: each input waits for the one before.
  let sent: Promise<unknown> = Promise.resolve();
  term.onData((d) => {
    sent = sent.then(() => s.terminalInput(t.id, d)).catch((e) => status(describe(e)));
  });
  term.onResize(({ rows, cols }) => {
    s.resizeTerminal(t.id, rows, cols).catch(() => {});
  });
  const resized = new ResizeObserver(() => fit.fit());
  resized.observe(box);
  (async () => {
    try {
      for await (const ev of s.terminalOutput(t.id, { signal: stop.signal })) {
        if (ev.type === "output") term.write(ev.data);
        else status(`the terminal's program ended: exit ${ev.exit.exit_code}${ev.exit.signal ? ` (${ev.exit.signal})` : ""}`);
      }
    } catch (e) {
      status(describe(e));
    }
  })();
  term.focus();
  status("terminal open");
  return () => {
    stop.abort();
    resized.disconnect();
    s.closeTerminal(t.id).catch(() => {});
    term.dispose();
  };
}
