// Functions: an editor with the server's lint drawn as squiggles while
// typing, and a debug drawer that calls the function with parameters.
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { python } from "@codemirror/lang-python";
import { bracketMatching, defaultHighlightStyle, indentOnInput, syntaxHighlighting } from "@codemirror/language";
import { type Diagnostic, lintGutter, linter } from "@codemirror/lint";
import { Compartment, EditorState, type Text } from "@codemirror/state";
import { drawSelection, EditorView, highlightActiveLine, keymap, lineNumbers } from "@codemirror/view";
import { call, describe, type FunctionResponse } from "./api.ts";
import { clear, field, fill, h, submit, submitOnModEnter } from "./dom.ts";
import { backendPicker } from "./pickers.ts";

type Language = "python" | "javascript";

const samples: Record<Language, { code: string; params: string }> = {
  python: {
    code: 'def main(a, b):\n    print("adding", a, "and", b)\n    return a + b\n',
    params: '{"a": 2, "b": 40}',
  },
  javascript: {
    code: 'function main(a, b) {\n  console.log("adding", a, "and", b);\n  return a + b;\n}\n',
    params: '{"a": 2, "b": 40}',
  },
};

/** The document position of a lint line (1-based) and column (0-based,
 * UTF-16 units, as CodeMirror counts), kept inside the document. */
function position(doc: Text, line: number, col: number): number {
  const l = doc.line(Math.min(Math.max(line, 1), doc.lines));
  return Math.min(l.from + Math.max(col, 0), l.to);
}

export function functionsPage(root: HTMLElement): () => void {
  let lang: Language = "python";
  const language = new Compartment();
  const problems = h("ul", { class: "problems", id: "problems" });
  const lintState = h("span", { class: "muted", id: "lint-state" });

  const lint = linter(
    async (view) => {
      const doc = view.state.doc;
      let found;
      try {
        found = await call((c) => c.lint({ code: doc.toString(), language: lang }));
      } catch (e) {
        lintState.textContent = `lint failed: ${describe(e)}`;
        return [];
      }
      if (view.state.doc !== doc) return []; // typed since: a newer lint follows
      lintState.textContent = found.length ? `${found.length} problem(s)` : "no problems";
      clear(problems);
      const out: Diagnostic[] = [];
      for (const d of found) {
        const line = d.line ?? 1, col = d.column ?? 0, message = d.message ?? "";
        let from = position(doc, line, col);
        let to = Math.max(from, position(doc, d.endLine ?? line, d.endColumn ?? col));
        if (from === to) {
          // At a line's end (Python's "expected an expression" after a
          // trailing "+"): underline the character before, so that there
          // is a squiggle to see, not only a point.
          const l = doc.lineAt(from);
          if (from > l.from) from--;
          else if (to < l.to) to++;
        }
        out.push({ from, to, severity: "error", message });
        problems.append(h("li", {}, `line ${line}, column ${col + 1}: ${message}`));
      }
      return out;
    },
    { delay: 400 },
  );

  const view = new EditorView({
    parent: h("div", { class: "editor", id: "editor" }),
    state: EditorState.create({
      doc: samples.python.code,
      extensions: [
        lineNumbers(), history(), drawSelection(), indentOnInput(), bracketMatching(), highlightActiveLine(),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        // Ctrl/Cmd+Enter runs (before the default keymap's own Mod-Enter).
        keymap.of([{ key: "Mod-Enter", run: () => (submit(form), true) }, ...defaultKeymap, ...historyKeymap, indentWithTab]),
        language.of(python()), lint, lintGutter(),
        // The editor's styles go in a <style> element: the page's CSP
        // admits it by this answer's nonce.
        EditorView.cspNonce.of(document.querySelector<HTMLMetaElement>('meta[name="csp-nonce"]')?.content ?? ""),
      ],
    }),
  });

  const langSelect = h("select", { id: "fn-language" }, h("option", { value: "python" }, "Python"), h("option", { value: "javascript" }, "JavaScript"));
  /** Switches the editor to want, holding code (its sample if none). */
  function setLanguage(want: Language, code?: string): void {
    lang = want;
    langSelect.value = want;
    const support = want === "python" ? Promise.resolve(python()) : import("@codemirror/lang-javascript").then((m) => m.javascript());
    support.then((ext) => {
      if (lang !== want) return;
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: code ?? samples[want].code }, effects: language.reconfigure(ext) });
    });
  }
  langSelect.addEventListener("change", () => {
    setLanguage(langSelect.value as Language);
    params.value = samples[lang].params;
    checkParams();
  });

  // The debug drawer.
  const params = h("textarea", { id: "fn-params", rows: 6, spellcheck: "false" });
  params.value = samples.python.params;
  const paramsError = h("small", { class: "error", id: "fn-params-error" });
  const entry = h("input", { id: "fn-entrypoint", placeholder: "main, or the only function" });
  const timeout = h("input", { id: "fn-timeout", type: "number", min: "0.1", step: "0.1", placeholder: "server default" });
  const where = backendPicker("fn");
  const run = h("button", { id: "fn-run", class: "primary", type: "submit" }, "Run");
  const result = h("div", { id: "fn-result", class: "result" });
  // A share link holds the code and the parameters in its fragment, which
  // the browser never sends: nothing is stored on the server, and opening
  // one fills the editor without running anything.
  const share = h("button", { id: "fn-share", type: "button" }, "Share link");
  const shareLink = h("input", { id: "fn-share-link", readonly: true, hidden: true });
  share.addEventListener("click", () => {
    const s: Shared = { language: lang, code: view.state.doc.toString(), params: params.value, entrypoint: entry.value };
    shareLink.value = `${location.origin}/functions#share=${encodeShared(s)}`;
    shareLink.hidden = false;
    shareLink.select();
    navigator.clipboard?.writeText(shareLink.value).catch(() => {});
  });

  function checkParams(): unknown | undefined {
    try {
      const v = params.value.trim() ? JSON.parse(params.value) : {};
      if (typeof v !== "object" || v === null) throw new Error("parameters are a JSON object (by name) or array (by position)");
      paramsError.textContent = "";
      run.disabled = false;
      return v;
    } catch (e) {
      paramsError.textContent = describe(e);
      run.disabled = true;
      return undefined;
    }
  }
  params.addEventListener("input", checkParams);

  const form = h("form", { class: "drawer", id: "fn-drawer" },
    h("h2", {}, "Debug"),
    field("Parameters (JSON)", params), paramsError,
    field("Entrypoint", entry),
    field("Timeout (s)", timeout),
    where.element,
    h("div", { class: "row" }, run, share), shareLink);
  submitOnModEnter(form, params, entry, timeout);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const p = checkParams();
    if (p === undefined) return;
    run.disabled = true;
    result.replaceChildren(h("p", { class: "muted" }, "running…"));
    try {
      const t = parseFloat(timeout.value);
      const r = await call((c) => c.execute({
        code: view.state.doc.toString(), language: lang, params: p as never,
        entrypoint: entry.value.trim() || undefined,
        timeout: t > 0 ? t : undefined, ...where.selection(),
      }));
      showResult(result, r);
    } catch (err) {
      result.replaceChildren(h("p", { class: "error" }, describe(err)));
    } finally {
      run.disabled = false;
    }
  });

  root.append(
    h("div", { class: "split" },
      h("section", { class: "card grow" },
        h("div", { class: "toolbar" }, h("h1", {}, "Function"), langSelect, lintState),
        view.dom.parentElement!, problems),
      h("div", { class: "side" }, h("section", { class: "card" }, form), h("section", { class: "card" }, h("h2", {}, "Result"), result))));
  const shared = decodeShared(location.hash);
  if (shared) {
    setLanguage(shared.language, shared.code);
    params.value = shared.params;
    entry.value = shared.entrypoint;
    checkParams();
  }
  view.focus();
  return () => view.destroy();
}

/** What a share link carries. */
type Shared = { language: Language; code: string; params: string; entrypoint: string };

/** s as base64url of its JSON (UTF-8). */
function encodeShared(s: Shared): string {
  const bytes = new TextEncoder().encode(JSON.stringify(s));
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The Shared a location's fragment holds; undefined when it holds none
 * or something else (a link is anyone's text: every field is checked). */
function decodeShared(hash: string): Shared | undefined {
  const m = /^#share=([A-Za-z0-9_-]{1,2000000})$/.exec(hash);
  if (!m) return undefined;
  try {
    const bin = atob(m[1].replace(/-/g, "+").replace(/_/g, "/"));
    const v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))));
    const str = (x: unknown) => (typeof x === "string" ? x : "");
    if (v?.language !== "python" && v?.language !== "javascript") return undefined;
    return { language: v.language, code: str(v.code), params: str(v.params), entrypoint: str(v.entrypoint) };
  } catch {
    return undefined;
  }
}

function showResult(el: HTMLElement, r: FunctionResponse): void {
  const meta = h("p", { class: "meta", id: "fn-meta" }, `${r.duration_ms} ms`, r.backend ? ` · ${r.backend}` : "", r.isolation ? ` (${r.isolation})` : "");
  if (r.ok) {
    fill(el,
      h("div", { class: "ok", id: "fn-value" }, h("span", { class: "label" }, "value"), h("pre", {}, JSON.stringify(r.data, null, 2))),
      r.stdout ? h("div", { id: "fn-prints" }, h("span", { class: "label" }, "prints"), h("pre", {}, r.stdout)) : null,
      meta);
    return;
  }
  fill(el,
    h("div", { class: "failed", id: "fn-error" },
      h("span", { class: "badge", id: "fn-code" }, r.code ?? "error"), " ",
      r.type ? h("strong", {}, r.type + ": ") : null, r.error ?? ""),
    r.traceback ? h("pre", { class: "traceback" }, r.traceback) : null,
    r.stdout ? h("div", { id: "fn-prints" }, h("span", { class: "label" }, "prints"), h("pre", {}, r.stdout)) : null,
    meta);
}
