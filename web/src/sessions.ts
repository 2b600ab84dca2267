// Sessions: open one, run commands in it (streamed; its files stay between
// commands), type in a terminal, run code in cells whose state stays (an
// interpreter context), browse, upload and download its files, close it.
import { call, describe, type CodeResult, type Session, type SessionInfo } from "./api.ts";
import { clear, download, field, h, size, submitOnModEnter } from "./dom.ts";
import { backendPicker } from "./pickers.ts";

export function sessionsPage(root: HTMLElement): () => void {
  // What a shown session holds open in the page (its terminal), closed
  // when another is shown or the page is left.
  let release = () => {};
  const list = h("tbody", { id: "sessions-list" });
  const panel = h("div", { id: "session-panel" });
  const msg = h("p", { class: "meta", id: "sessions-msg" });
  const where = backendPicker("session");
  const create = h("button", { class: "primary", type: "submit", id: "session-open" }, "Open session");

  async function refresh(select?: string): Promise<void> {
    let all: SessionInfo[];
    try {
      all = await call((c) => c.sessions());
    } catch (e) {
      msg.textContent = describe(e);
      return;
    }
    clear(list);
    for (const s of all) {
      const open = h("a", { href: "#", "data-id": s.id }, s.id);
      open.addEventListener("click", (e) => {
        e.preventDefault();
        e.stopPropagation();
        show(s.id);
      });
      list.append(h("tr", {}, h("td", {}, open), h("td", {}, `${s.backend} (${s.isolation})`), h("td", {}, String(s.execs)),
        h("td", {}, new Date(s.expires).toLocaleTimeString())));
    }
    if (!all.length) list.append(h("tr", {}, h("td", { colspan: 4, class: "muted" }, "No open sessions.")));
    if (select) show(select);
  }

  async function show(id: string): Promise<void> {
    try {
      const s = await call((c) => c.session(id));
      release();
      let el: HTMLElement;
      [el, release] = sessionPanel(s, (closed) => {
        if (closed) {
          release();
          panel.replaceChildren();
        }
        refresh();
      });
      panel.replaceChildren(el);
    } catch (e) {
      msg.textContent = describe(e);
    }
  }

  const form = h("form", { class: "card" }, h("h1", {}, "Sessions"),
    h("p", { class: "muted" }, "A session is a sandbox that keeps its files between commands until it is closed, its time to live passes or it stays unused for its idle timeout. Commands run one at a time."),
    h("div", { class: "row" }, where.element, create), msg,
    h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "id"), h("th", {}, "backend"), h("th", {}, "commands"), h("th", {}, "expires"))), list));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    create.disabled = true;
    try {
      const s = await call((c) => c.createSession({ ...where.selection() }));
      msg.textContent = `opened ${s.id}`;
      await refresh(s.id);
    } catch (err) {
      msg.textContent = describe(err);
    } finally {
      create.disabled = false;
    }
  });
  root.append(form, panel);
  refresh();
  return () => release();
}

/** One session's commands, terminal, code cells and files; changed is
 * called after a command (closed false) and when it is closed (true).
 * The function returned closes what the panel opened. */
function sessionPanel(s: Session, changed: (closed: boolean) => void): [HTMLElement, () => void] {
  const command = h("input", { id: "session-command", value: "ls -la && echo hello > note.txt", spellcheck: "false" });
  const output = h("pre", { class: "output", id: "session-output" });
  const status = h("p", { class: "meta", id: "session-status" });
  const exec = h("button", { class: "primary", type: "submit", id: "session-run" }, "Run");
  const execForm = h("form", { class: "row" }, field("Command (sh -c)", command), exec);
  execForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    exec.disabled = true;
    output.replaceChildren();
    status.textContent = "running…";
    try {
      const dec = { stdout: new TextDecoder(), stderr: new TextDecoder() };
      for await (const ev of await call(async () => s.execStream({ command: ["sh", "-c", command.value] }))) {
        if (ev.type === "result") {
          const r = ev.result;
          status.replaceChildren(h("span", { class: "badge" }, r.reason), ` exit ${r.exit_code} · ${Math.round((r.usage?.wall_ns ?? 0) / 1e6)} ms`);
          break;
        }
        output.append(h("span", { class: ev.type }, dec[ev.type].decode(ev.data, { stream: true })));
      }
      await files.load();
      changed(false);
    } catch (err) {
      status.textContent = describe(err);
    } finally {
      exec.disabled = false;
    }
  });
  const files = fileBrowser(s);
  const close = h("button", { type: "button", id: "session-close" }, "Close session");
  close.addEventListener("click", async () => {
    try {
      await call(() => s.close());
      changed(true);
    } catch (e) {
      status.textContent = describe(e);
    }
  });
  files.load();
  const term = terminalPart(s);
  return [h("section", { class: "card" },
    h("div", { class: "toolbar" }, h("h2", {}, `Session ${s.id}`), h("span", { class: "muted" }, `${s.info.backend} (${s.info.isolation})`), close),
    execForm, output, status, h("h3", {}, "Terminal"), term.element, h("h3", {}, "Code"), cellsPart(s), h("h3", {}, "Files"), files.element), term.close];
}

/** A terminal running /bin/sh in the session, opened on demand. */
function terminalPart(s: Session): { element: HTMLElement; close(): void } {
  const box = h("div", { class: "terminal-box", id: "terminal", hidden: true });
  const msg = h("p", { class: "meta", id: "terminal-status" });
  const open = h("button", { type: "button", id: "terminal-open" }, "Open terminal");
  let close = () => {};
  let gone = false; // the panel was closed: a terminal opening now is closed as it opens
  open.addEventListener("click", async () => {
    open.disabled = true;
    box.hidden = false;
    try {
      const { openTerminal } = await import("./terminal.ts");
      close = await openTerminal(s, box, (t) => (msg.textContent = t));
      if (gone) close();
    } catch (e) {
      msg.textContent = describe(e);
      box.hidden = true;
      open.disabled = false;
    }
  });
  return {
    element: h("div", {}, h("div", { class: "row" }, open, msg), box),
    close: () => {
      gone = true;
      close();
    },
  };
}

/** Code cells run one after another in an interpreter context of the
 * session, as in a notebook: a variable set in one is there in the next;
 * each shows what it printed and its last expression's value. */
function cellsPart(s: Session): HTMLElement {
  const language = h("select", { id: "cell-language" }, h("option", { value: "python" }, "Python"), h("option", { value: "javascript" }, "JavaScript"));
  const code = h("textarea", { id: "cell-code", rows: 4, spellcheck: "false" });
  code.value = "x = 6 * 7\nx";
  const run = h("button", { class: "primary", type: "submit", id: "cell-run" }, "Run cell");
  const cells = h("div", { id: "cells" });
  const form = h("form", {}, h("div", { class: "row" }, field("Language", language), run),
    field("Code (Ctrl+Enter runs; state stays between cells)", code), cells);
  submitOnModEnter(form, code);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    run.disabled = true;
    const src = code.value;
    try {
      const r = await call(() => s.runCode(src, { language: language.value }));
      cells.append(cell(src, r));
      code.value = "";
    } catch (err) {
      cells.append(h("div", { class: "cell failed" }, h("pre", {}, src), h("p", { class: "error" }, describe(err))));
    } finally {
      run.disabled = false;
    }
  });
  return form;
}

function cell(src: string, r: CodeResult): HTMLElement {
  return h("div", { class: `cell ${r.ok ? "ok" : "failed"}` },
    h("pre", {}, src),
    r.stdout ? h("pre", { class: "output" }, r.stdout) : null,
    r.stderr ? h("pre", { class: "output" }, h("span", { class: "stderr" }, r.stderr)) : null,
    r.ok && r.repr !== undefined ? h("div", { class: "value" }, h("span", { class: "label" }, `value · ${r.type ?? ""}`), " ", r.repr) : null,
    r.error ? h("div", {}, h("span", { class: "badge" }, r.error.type), " ", r.error.message, r.error.traceback ? h("pre", { class: "traceback" }, r.error.traceback) : null) : null,
    h("p", { class: "meta" }, `${r.duration_ms} ms`, r.interrupted ? " · interrupted" : "", r.lost ? " · the context was lost (the next cell starts a new one)" : ""));
}

function fileBrowser(s: Session): { element: HTMLElement; load(): Promise<void> } {
  let dir = "";
  const where = h("p", { class: "meta", id: "files-dir" });
  const body = h("tbody", { id: "files-list" });
  const msg = h("p", { class: "meta" });
  const upload = h("input", { type: "file", multiple: true, id: "files-upload" });
  const mkdir = h("input", { placeholder: "new directory", id: "files-mkdir" });

  async function load(): Promise<void> {
    let entries;
    try {
      entries = await call(() => s.list(dir));
    } catch (e) {
      msg.textContent = describe(e);
      return;
    }
    where.textContent = `/${dir}`;
    clear(body);
    if (dir) {
      const up = h("a", { href: "#" }, "..");
      up.addEventListener("click", (e) => { e.preventDefault(); e.stopPropagation(); dir = dir.split("/").slice(0, -1).join("/"); load(); });
      body.append(h("tr", {}, h("td", {}, up), h("td", {}), h("td", {})));
    }
    for (const f of entries) {
      const path = f.path;
      const base = path.split("/").pop() ?? path;
      const name = h("a", { href: "#" }, f.type === "dir" ? `${base}/` : base);
      name.addEventListener("click", async (e) => {
        e.preventDefault();
        e.stopPropagation();
        if (f.type === "dir") {
          dir = path;
          load();
          return;
        }
        try {
          const link = download(path, await call(() => s.getFile(path)));
          link.click();
        } catch (err) {
          msg.textContent = describe(err);
        }
      });
      const del = h("button", { type: "button", class: "small" }, "delete");
      del.addEventListener("click", async () => {
        try {
          await call(() => s.remove(path));
          load();
        } catch (err) {
          msg.textContent = describe(err);
        }
      });
      body.append(h("tr", {}, h("td", {}, name), h("td", {}, f.type === "file" ? size(f.size) : f.type), h("td", {}, del)));
    }
  }

  upload.addEventListener("change", async () => {
    if (!upload.files?.length) return;
    try {
      const put = await call(() => s.upload([...upload.files!].map((f) => ({ path: f.name, data: f })), dir));
      msg.textContent = `uploaded ${put.length} file(s)`;
      upload.value = "";
      load();
    } catch (e) {
      msg.textContent = describe(e);
    }
  });
  mkdir.addEventListener("keydown", async (e) => {
    if (e.key !== "Enter" || !mkdir.value.trim()) return;
    e.preventDefault();
    try {
      await call(() => s.mkdir(dir ? `${dir}/${mkdir.value.trim()}` : mkdir.value.trim()));
      mkdir.value = "";
      load();
    } catch (err) {
      msg.textContent = describe(err);
    }
  });
  return {
    element: h("div", {}, where, h("table", {}, body), h("div", { class: "row" }, field("Upload", upload), field("Make directory", mkdir)), msg),
    load,
  };
}
