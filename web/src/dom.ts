// A small element builder: every text goes in as a text node, never as
// HTML, so what a sandboxed program prints cannot become markup.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | EventListener | undefined>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

/** Replaces el's children. */
export function fill(el: Node, ...children: Child[]): void {
  clear(el);
  append(el, ...children);
}

export function clear(el: Node): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

/** A labelled form field. */
export function field(label: string, input: HTMLElement, hint?: string): HTMLLabelElement {
  return h("label", { class: "field" }, h("span", {}, label), input, hint ? h("small", {}, hint) : null);
}

/** Bytes as "1.5 KiB". */
export function size(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

/** A link that downloads data as name (an object URL, freed after a minute). */
export function download(name: string, data: Uint8Array): HTMLAnchorElement {
  const url = URL.createObjectURL(new Blob([data as BlobPart]));
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return h("a", { href: url, download: name.split("/").pop() ?? name }, name);
}

/** Base64 to bytes and back (the API's encoding of files in JSON). */
export function fromBase64(s: string): Uint8Array {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

/** The files chosen in input as a request's files (name → base64), or
 * undefined for none. */
export async function chosenFiles(input: HTMLInputElement): Promise<Record<string, string> | undefined> {
  if (!input.files?.length) return undefined;
  const m: Record<string, string> = {};
  for (const f of input.files) m[f.name] = toBase64(new Uint8Array(await f.arrayBuffer()));
  return m;
}

export function toBase64(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(s);
}

/** Submits form as its submit button would: not while that is disabled
 * (a page disables it while its input is invalid or a call runs). */
export function submit(form: HTMLFormElement): void {
  if (!form.querySelector("button[type=submit]:disabled")) form.requestSubmit();
}

/** Ctrl+Enter (Cmd+Enter on a Mac) in any of els submits form. */
export function submitOnModEnter(form: HTMLFormElement, ...els: HTMLElement[]): void {
  for (const el of els) {
    el.addEventListener("keydown", (e) => {
      if (e.key !== "Enter" || !(e.ctrlKey || e.metaKey)) return;
      e.preventDefault();
      submit(form);
    });
  }
}
