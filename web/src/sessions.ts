// Sessions: open one, run commands in it (streamed; its files stay between
// commands), browse, upload and download its files, close it.
import { call, describe, type Session, type SessionInfo } from "./api.ts";
import { clear, download, field, h, size } from "./dom.ts";
import { backendPicker } from "./pickers.ts";

export function sessionsPage(root: HTMLElement): void {
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
      panel.replaceChildren(sessionPanel(s, (closed) => {
        if (closed) panel.replaceChildren();
        refresh();
      }));
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
}

/** One session's commands and files; changed is called after a command
 * (closed false) and when it is closed (true). */
function sessionPanel(s: Session, changed: (closed: boolean) => void): HTMLElement {
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
  return h("section", { class: "card" },
    h("div", { class: "toolbar" }, h("h2", {}, `Session ${s.id}`), h("span", { class: "muted" }, `${s.info.backend} (${s.info.isolation})`), close),
    execForm, output, status, h("h3", {}, "Files"), files.element);
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
