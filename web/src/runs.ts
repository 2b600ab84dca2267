// Runs: a command or code in a language, files to upload, limits; the
// output streamed as the program writes it; artifacts to download.
import { call, describe, type RunResult } from "./api.ts";
import { chosenFiles, download, field, fromBase64, h, size, submitOnModEnter } from "./dom.ts";
import { backendPicker } from "./pickers.ts";

export function runsPage(root: HTMLElement): () => void {
  const abort = new AbortController();
  const mode = h("select", { id: "run-mode" },
    ...[["shell", "shell command"], ["python", "Python"], ["javascript", "JavaScript"], ["bash", "bash script"]].map(([v, t]) => h("option", { value: v }, t)));
  const source = h("textarea", { id: "run-source", rows: 8, spellcheck: "false" });
  source.value = "for i in 1 2 3; do echo line $i; sleep 1; done";
  const files = h("input", { id: "run-files", type: "file", multiple: true });
  const stdin = h("textarea", { id: "run-stdin", rows: 2, placeholder: "(none)" });
  const wall = h("input", { id: "run-wall", type: "number", min: "0.1", step: "0.1", placeholder: "server default" });
  const memory = h("input", { id: "run-memory", placeholder: "e.g. 256m; server default" });
  // The networks this server takes: its API document's (host is never
  // offered over the API; more come with egress policies).
  const network = h("select", { id: "run-network" }, h("option", { value: "" }, "none (default)"));
  networks().then((all) => network.append(...all.filter((n) => n !== "none").map((n) => h("option", { value: n }, n))));
  const where = backendPicker("run");
  const start = h("button", { id: "run-start", class: "primary", type: "submit" }, "Run");
  const stop = h("button", { id: "run-stop", type: "button", disabled: true }, "Stop");
  const output = h("pre", { id: "run-output", class: "output" });
  const status = h("p", { id: "run-status", class: "meta" });
  const artifacts = h("ul", { id: "run-artifacts" });
  let running: AbortController | undefined;

  stop.addEventListener("click", () => running?.abort());
  const form = h("form", { class: "card", id: "run-form" },
    h("h1", {}, "Run"),
    h("div", { class: "row" }, field("What", mode), where.element),
    field("Command or code", source, "A shell command runs as sh -c; code runs in the work dir with its language's interpreter."),
    h("div", { class: "row" }, field("Files", files, "Put in the work dir"), field("Stdin", stdin)),
    h("div", { class: "row" }, field("Wall limit (s)", wall), field("Memory", memory), field("Network", network)),
    h("div", { class: "row" }, start, stop));
  submitOnModEnter(form, source, stdin);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    output.replaceChildren();
    artifacts.replaceChildren();
    status.textContent = "starting…";
    status.className = "meta running";
    start.disabled = true;
    stop.disabled = false;
    running = new AbortController();
    abort.signal.addEventListener("abort", () => running?.abort());
    try {
      const req: Record<string, unknown> = { ...where.selection() };
      if (mode.value === "shell") req.command = ["sh", "-c", source.value];
      else {
        req.code = source.value;
        req.language = mode.value;
      }
      if (stdin.value) req.stdin = stdin.value;
      if (network.value) req.network = network.value;
      const limits: Record<string, unknown> = {};
      if (parseFloat(wall.value) > 0) limits.wall = parseFloat(wall.value);
      if (memory.value.trim()) limits.memory = memory.value.trim();
      if (Object.keys(limits).length) req.limits = limits;
      const chosen = await chosenFiles(files);
      if (chosen) req.files = chosen;
      const dec = { stdout: new TextDecoder(), stderr: new TextDecoder() };
      status.textContent = "running…";
      for await (const ev of await call(async (c) => c.runStream(req as never, { signal: running!.signal }))) {
        if (ev.type === "result") {
          showRun(status, artifacts, ev.result);
          break;
        }
        output.append(h("span", { class: ev.type }, dec[ev.type].decode(ev.data, { stream: true })));
        output.scrollTop = output.scrollHeight;
      }
    } catch (err) {
      status.className = "meta error";
      status.textContent = describe(err);
    } finally {
      start.disabled = false;
      stop.disabled = true;
      running = undefined;
    }
  });
  root.append(form, h("section", { class: "card" }, h("h2", {}, "Output"), output, status, artifacts));
  return () => abort.abort();
}

/** The values the server's API document allows for a run's network. */
async function networks(): Promise<string[]> {
  try {
    const doc = await (await fetch("/v1/openapi.json")).json();
    const e = doc?.components?.schemas?.RunRequest?.properties?.network?.enum;
    return Array.isArray(e) ? e.filter((x): x is string => typeof x === "string") : [];
  } catch {
    return [];
  }
}

/** The end of a run: how it ended, what it cost, what it left. */
function showRun(status: HTMLElement, list: HTMLElement, r: RunResult): void {
  status.className = `meta ${r.reason === "exited" && r.exit_code === 0 ? "ok" : "failed"}`;
  status.replaceChildren(
    h("span", { class: "badge", id: "run-reason" }, r.reason), " ",
    r.exit_code !== undefined ? `exit ${r.exit_code} · ` : "",
    `${Math.round((r.usage?.wall_ns ?? 0) / 1e6)} ms · ${r.backend} (${r.isolation})`,
    r.message ? ` · ${r.message}` : "");
  for (const a of r.artifacts ?? []) {
    const bytes = fromBase64(a.data ?? "");
    list.append(h("li", {}, download(a.path ?? "artifact", bytes), ` ${size(bytes.length)}`));
  }
  for (const s of r.skipped ?? []) list.append(h("li", { class: "muted" }, `${s.path}: not returned (${s.reason})`));
}
