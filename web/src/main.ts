// The playground's shell: a page per path (the server answers every page
// path with index.html), links handled here without reloading.
import "./style.css";
import { setupLogin } from "./api.ts";
import { h } from "./dom.ts";
import { runsPage } from "./runs.ts";
import { sessionsPage } from "./sessions.ts";
import { statusPage } from "./status.ts";
import { toolsPage } from "./tools.ts";

/** A page draws itself into root and returns what stops it (timers). */
export type Page = (root: HTMLElement) => (() => void) | void;

// The editor is most of the code: it loads with the Functions page only.
const pages: Record<string, () => Promise<Page>> = {
  "/functions": async () => (await import("./functions.ts")).functionsPage,
  "/runs": async () => runsPage,
  "/tools": async () => toolsPage,
  "/sessions": async () => sessionsPage,
  "/status": async () => statusPage,
};

let stop: (() => void) | void;
let drawn = 0; // the latest draw: a page that loads after a newer one is dropped

async function draw(): Promise<void> {
  if (stop) stop();
  stop = undefined;
  const n = ++drawn;
  const path = location.pathname === "/" ? "/functions" : location.pathname.replace(/\/+$/, "");
  const root = document.getElementById("page")!;
  root.replaceChildren();
  for (const a of document.querySelectorAll<HTMLAnchorElement>("header nav a")) {
    a.classList.toggle("active", a.pathname === path);
  }
  const page = pages[path];
  if (!page) {
    root.append(h("section", { class: "card" }, h("h1", {}, "Not found"), h("p", {}, `No page ${path}. `, h("a", { href: "/" }, "Back to Functions"))));
    return;
  }
  document.title = `execbox · ${path.slice(1)}`;
  let f: Page;
  try {
    f = await page();
  } catch (e) {
    root.append(h("p", { class: "error" }, `Loading the page failed: ${e}`));
    return;
  }
  if (n === drawn) stop = f(root);
}

document.addEventListener("click", (e) => {
  const a = (e.target as Element).closest?.("a");
  if (!a || a.origin !== location.origin || a.hasAttribute("download") || e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
  e.preventDefault();
  if (a.pathname !== location.pathname) history.pushState(null, "", a.pathname);
  draw();
});
window.addEventListener("popstate", draw);
setupLogin(draw);
draw();
