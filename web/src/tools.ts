// Tools: the server's tools with their argument schemas; one run with JSON
// arguments, its result or its error, what it printed and the files it wrote.
import { call, describe, type Tool, type ToolResult } from "./api.ts";
import { chosenFiles, download, field, fromBase64, h, size, submitOnModEnter } from "./dom.ts";
import { backendPicker } from "./pickers.ts";

export function toolsPage(root: HTMLElement): () => void {
  const abort = new AbortController();
  const list = h("ul", { id: "tool-list", class: "tools" });
  const problems = h("ul", { id: "tool-problems" });
  const name = h("select", { id: "tool-name" });
  const schema = h("pre", { id: "tool-schema", class: "output small" });
  const args = h("textarea", { id: "tool-args", rows: 6, spellcheck: "false" });
  const argsNote = h("p", { class: "meta", id: "tool-args-note" });
  const files = h("input", { id: "tool-files", type: "file", multiple: true });
  const where = backendPicker("tool");
  const start = h("button", { id: "tool-run", class: "primary", type: "submit" }, "Run");
  const status = h("p", { id: "tool-status", class: "meta" });
  const result = h("pre", { id: "tool-result", class: "output" });
  const output = h("pre", { id: "tool-output", class: "output" });
  const artifacts = h("ul", { id: "tool-artifacts" });
  let tools: Tool[] = [];

  const pick = () => {
    const t = tools.find((x) => x.name === name.value);
    schema.textContent = t ? JSON.stringify(t.parameters, null, 2) : "";
    args.value = JSON.stringify(example(t), null, 2);
    checkArgs();
  };
  // The arguments must be a JSON object; the server checks the schema.
  const checkArgs = () => {
    let ok = false;
    try {
      const v = JSON.parse(args.value || "{}");
      ok = v !== null && typeof v === "object" && !Array.isArray(v);
    } catch {
      /* not JSON */
    }
    start.disabled = !ok || !name.value;
    argsNote.textContent = ok ? "" : "The arguments must be a JSON object.";
    argsNote.className = ok ? "meta" : "meta error";
  };
  name.addEventListener("change", pick);
  args.addEventListener("input", checkArgs);

  call((c) => c.tools(where.selection()))
    .then((cat) => {
      tools = cat.tools;
      for (const t of tools) {
        name.append(h("option", { value: t.name }, t.name));
        list.append(h("li", {}, h("strong", {}, t.name), h("span", { class: "muted" }, ` ${t.source}`), h("div", {}, t.description)));
      }
      for (const p of cat.problems) {
        problems.append(h("li", { class: "error" }, `${p.name || p.source}: ${p.message}`));
      }
      if (tools.some((t) => t.name === "python")) name.value = "python";
      pick();
    })
    .catch((e) => list.append(h("li", { class: "error" }, `Listing the tools failed: ${describe(e)}`)));

  const form = h("form", { class: "card", id: "tool-form" },
    h("h1", {}, "Run a tool"),
    h("div", { class: "row" }, field("Tool", name), where.element),
    field("Arguments (JSON)", args, "Checked against the tool's schema before anything runs."),
    argsNote,
    h("div", { class: "row" }, field("Files", files, "Put in the work dir (read_file reads them)")),
    h("div", { class: "row" }, start),
    h("details", {}, h("summary", {}, "Argument schema"), schema));
  submitOnModEnter(form, args);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    result.replaceChildren();
    output.replaceChildren();
    artifacts.replaceChildren();
    status.className = "meta running";
    status.textContent = "running…";
    start.disabled = true;
    try {
      const req: Record<string, unknown> = { ...where.selection(), args: JSON.parse(args.value || "{}") };
      const chosen = await chosenFiles(files);
      if (chosen) req.files = chosen;
      showResult(await call((c) => c.runTool(name.value, req as never, { signal: abort.signal })), status, result, output, artifacts);
    } catch (err) {
      status.className = "meta error";
      status.textContent = describe(err);
    } finally {
      start.disabled = false;
    }
  });
  root.append(form,
    h("section", { class: "card" }, h("h2", {}, "Result"), status, result, h("h3", {}, "Printed"), output, artifacts),
    h("section", { class: "card" }, h("h2", {}, "Tools"), list, problems));
  return () => abort.abort();
}

/** Arguments to start from: each required property with a value of its type. */
function example(t: Tool | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const p = t?.parameters as { properties?: Record<string, { type?: string }>; required?: string[] } | undefined;
  for (const k of p?.required ?? []) {
    const ty = p?.properties?.[k]?.type;
    out[k] = ty === "number" || ty === "integer" ? 0 : ty === "boolean" ? false : ty === "object" ? {} : ty === "array" ? [] : "";
  }
  if (t?.name === "python") out.code = "import math\nmath.factorial(10)";
  return out;
}

function showResult(r: ToolResult, status: HTMLElement, result: HTMLElement, output: HTMLElement, list: HTMLElement): void {
  status.className = `meta ${r.ok ? "ok" : "failed"}`;
  status.replaceChildren(
    h("span", { class: "badge", id: "tool-outcome" }, r.ok ? "ok" : (r.error?.code ?? "failed")), " ",
    `${r.duration_ms} ms · ${r.backend} (${r.isolation}) · ${r.source}`);
  if (r.ok) result.textContent = JSON.stringify(r.result, null, 2);
  else result.replaceChildren(
    h("span", { class: "stderr" }, `${r.error?.type ? r.error.type + ": " : ""}${r.error?.message ?? ""}\n`),
    r.error?.traceback ?? "");
  output.textContent = r.output ?? "";
  for (const a of r.artifacts ?? []) {
    const bytes = fromBase64(a.data ?? "");
    list.append(h("li", {}, download(a.path ?? "artifact", bytes), ` ${size(bytes.length)}`));
  }
}
