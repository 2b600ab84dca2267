// The API client of every page: the TypeScript client the project ships,
// with the token from this tab's session storage. A 401 opens the login
// prompt; the page that asked is drawn again after signing in.
import { Client, ExecboxError } from "../../clients/typescript/src/index.ts";

export { ExecboxError };
export type * from "../../clients/typescript/src/index.ts";

const key = "execbox.token";
let client = make();
let onLogin: () => void = () => {};

function make(): Client {
  return new Client(location.origin, { token: sessionStorage.getItem(key) ?? undefined });
}

/** call runs f with the client; a 401 asks for a token — unless a new
 * token was given meanwhile (the refusal is of the old one). */
export async function call<T>(f: (c: Client) => Promise<T>): Promise<T> {
  const used = client;
  try {
    return await f(used);
  } catch (e) {
    if (e instanceof ExecboxError && e.status === 401 && used === client) login(e.message);
    throw e;
  }
}

export function hasToken(): boolean {
  return sessionStorage.getItem(key) !== null;
}

/** Shows the login prompt, saying why. */
export function login(why = "This server needs an API token."): void {
  const dlg = document.getElementById("login") as HTMLDialogElement;
  (document.getElementById("login-why") as HTMLElement).textContent = why;
  if (!dlg.open) dlg.showModal();
}

/** Wires the prompt: a token given is kept and the page drawn again. */
export function setupLogin(redraw: () => void): void {
  onLogin = redraw;
  const dlg = document.getElementById("login") as HTMLDialogElement;
  const input = document.getElementById("login-token") as HTMLInputElement;
  dlg.addEventListener("close", () => {
    if (dlg.returnValue !== "ok") return;
    const t = input.value.trim();
    input.value = "";
    if (t) sessionStorage.setItem(key, t);
    else sessionStorage.removeItem(key);
    client = make();
    onLogin();
  });
  document.getElementById("token-button")!.addEventListener("click", () => login("Give the API token to use from this tab."));
}

/** A failure as one line for people. */
export function describe(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
