// Status: the backends and what auto picks, live metrics as small
// charts, and the audit log (an admin token's) with filters.
import { call, describe, ExecboxError } from "./api.ts";
import { clear, field, fill, h } from "./dom.ts";

const svgNS = "http://www.w3.org/2000/svg";

export function statusPage(root: HTMLElement): () => void {
  const health = h("div", { id: "status-health" }, h("p", { class: "muted" }, "loading…"));
  const charts = new Charts();
  const audit = auditView();
  const events = new AbortController();
  const approvals = approvalsView();
  root.append(
    h("section", { class: "card" }, h("h1", {}, "Backends"), health),
    h("section", { class: "card" }, h("h2", {}, "Held for approval"), approvals.element),
    h("section", { class: "card" }, h("h2", {}, "Activity (per second, last 2 minutes)"), charts.element),
    h("section", { class: "card" }, h("h2", {}, "Events (live)"), eventsView(events.signal)),
    h("section", { class: "card" }, h("h2", {}, "Audit log"), audit));
  loadHealth(health);
  charts.poll();
  approvals.poll();
  const timer = setInterval(() => {
    charts.poll();
    approvals.poll();
  }, 2000);
  return () => {
    clearInterval(timer);
    events.abort();
  };
}

/** The calls a guard rule holds (an admin token's view): approve or deny
 * each; polled with the charts. */
function approvalsView(): { element: HTMLElement; poll(): void } {
  const body = h("tbody", { id: "approvals-list" });
  const msg = h("p", { class: "meta", id: "approvals-msg" });
  const element = h("div", {}, h("table", {}, h("thead", {}, h("tr", {}, ...["held since", "rule", "token", "operation", "tool", "language", "backend", "caller", ""].map((t) => h("th", {}, t)))), body), msg);
  let denied = false;
  return {
    element,
    poll() {
      if (denied) return;
      call((c) => c.approvals()).then((list) => {
        msg.textContent = list.length ? "" : "nothing is waiting";
        body.replaceChildren(...list.map((a) => {
          const decide = (approve: boolean) => async () => {
            try {
              await call((c) => c.decide(a.id, approve, approve ? "" : "denied in the playground"));
              this.poll();
            } catch (e) {
              msg.textContent = describe(e);
            }
          };
          const yes = h("button", { type: "button", class: "primary" }, "Approve");
          const no = h("button", { type: "button" }, "Deny");
          yes.addEventListener("click", decide(true));
          no.addEventListener("click", decide(false));
          return h("tr", {}, h("td", {}, new Date(a.created).toLocaleTimeString()), h("td", {}, a.rule), h("td", {}, a.token ?? ""),
            h("td", {}, a.operation), h("td", {}, a.tool ?? ""), h("td", {}, a.language ?? ""), h("td", {}, a.backend ?? ""),
            h("td", {}, a.tool_call_id ?? a.run_id ?? ""), h("td", {}, yes, " ", no));
        }));
      }).catch((e) => {
        // A token that is not an admin's cannot see them: say so once.
        denied = e instanceof ExecboxError && e.status === 403;
        msg.textContent = denied ? "Approvals need an admin token." : describe(e);
      });
    },
  };
}

/** The latest lifecycle events, newest first, as the server streams them. */
function eventsView(signal: AbortSignal): HTMLElement {
  const body = h("tbody", { id: "events-list" });
  const msg = h("p", { class: "meta", id: "events-msg" }, "listening…");
  (async () => {
    try {
      for await (const e of await call(async (c) => c.events({}, signal))) {
        if (e.type === "events.dropped") {
          msg.textContent = `this page lost ${e.dropped} event(s): it did not keep up`;
          continue;
        }
        if (msg.textContent === "listening…") msg.textContent = "";
        body.prepend(h("tr", {}, h("td", {}, new Date(e.time).toLocaleTimeString()), h("td", {}, e.type), h("td", {}, e.kind),
          h("td", {}, e.run_id ?? ""), h("td", {}, e.backend ?? ""), h("td", {}, e.reason ?? e.error_code ?? ""),
          h("td", {}, e.attempt ? String(e.attempt) : "")));
        while (body.children.length > 50) body.lastElementChild!.remove();
      }
      msg.textContent = "the stream ended";
    } catch (err) {
      if (!signal.aborted) msg.textContent = describe(err);
    }
  })();
  return h("div", {}, msg,
    h("table", {}, h("thead", {}, h("tr", {}, ...["time", "type", "kind", "run id", "backend", "reason / error", "attempt"].map((t) => h("th", {}, t)))), body));
}

async function loadHealth(el: HTMLElement): Promise<void> {
  try {
    const hl = await call((c) => c.health());
    const rows = (hl.candidates ?? []).map((b) => h("tr", { class: b.name === hl.backend ? "chosen" : "" },
      h("td", {}, b.name), h("td", {}, b.isolation),
      h("td", {}, b.available ? "yes" : "no"), h("td", {}, b.ready ? "yes" : "no"),
      h("td", {}, b.allowed ? "yes" : "no"), h("td", { class: "reason" }, b.reason)));
    const pools = (hl.pools?.pools ?? []).map((p) => h("tr", {},
      h("td", {}, `${p.backend}/${p.language}`), h("td", {}, `${p.ready}/${p.size}`), h("td", {}, String(p.hits)), h("td", {}, String(p.misses)),
      h("td", {}, p.error ?? "")));
    fill(el,
      h("p", { id: "status-choice" }, "auto picks ", h("strong", {}, hl.backend || "nothing"), hl.isolation ? ` (${hl.isolation})` : "", ": ", hl.selected_because),
      h("table", {}, h("thead", {}, h("tr", {}, ...["backend", "isolation", "available", "ready", "allowed", "why"].map((t) => h("th", {}, t)))), h("tbody", {}, ...rows)),
      pools.length ? h("table", {}, h("thead", {}, h("tr", {}, ...["warm pool", "ready", "hits", "misses", "error"].map((t) => h("th", {}, t)))), h("tbody", {}, ...pools))
        : h("p", { class: "muted" }, `No warm pools${hl.pools?.reason ? `: ${hl.pools?.reason}` : ""}.`));
  } catch (e) {
    el.replaceChildren(h("p", { class: "error" }, describe(e)));
  }
}

/** The sum of a metric's samples whose labels pass keep. */
function sum(text: string, name: string, keep: (labels: string) => boolean = () => true): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (m && m[1] === name && keep(m[2] ?? "")) total += Number(m[3]);
  }
  return total;
}

const series: { name: string; title: string; value(text: string): number; rate: boolean }[] = [
  { name: "runs", title: "executions", rate: true, value: (t) => sum(t, "execbox_executions_total") },
  { name: "errors", title: "failed or limited executions", rate: true, value: (t) => sum(t, "execbox_executions_total", (l) => !/reason="(exited|ok)"/.test(l)) },
  { name: "pool-hits", title: "warm pool hits", rate: true, value: (t) => sum(t, "execbox_pool_events_total", (l) => l.includes('event="hit"')) },
  { name: "in-flight", title: "running now", rate: false, value: (t) => sum(t, "execbox_executions_in_flight") },
];

/** Small line charts of the server's counters, drawn as SVG. */
class Charts {
  readonly element = h("div", { class: "charts", id: "status-charts" });
  private readonly points = series.map(() => [] as number[]);
  private last?: { at: number; values: number[] };
  private readonly svgs = series.map((s) => {
    const svg = document.createElementNS(svgNS, "svg");
    svg.setAttribute("viewBox", "0 0 120 40");
    svg.setAttribute("preserveAspectRatio", "none");
    const now = h("span", { class: "now" });
    this.element.append(h("figure", { id: `chart-${s.name}` }, svg, h("figcaption", {}, s.title, " ", now)));
    return { svg, now };
  });

  async poll(): Promise<void> {
    let text: string;
    try {
      text = await call((c) => c.metrics());
    } catch {
      return;
    }
    const at = performance.now();
    const values = series.map((s) => s.value(text));
    series.forEach((s, i) => {
      let v = values[i];
      if (s.rate) {
        if (!this.last) return;
        v = Math.max(0, (values[i] - this.last.values[i]) / ((at - this.last.at) / 1000));
      }
      const p = this.points[i];
      p.push(v);
      if (p.length > 60) p.shift();
      this.draw(i);
    });
    this.last = { at, values };
  }

  private draw(i: number): void {
    const p = this.points[i];
    const { svg, now } = this.svgs[i];
    const top = Math.max(1, ...p);
    const pts = p.map((v, j) => `${(120 * j) / 59},${(38 - (36 * v) / top).toFixed(1)}`).join(" ");
    const line = document.createElementNS(svgNS, "polyline");
    line.setAttribute("points", pts);
    svg.replaceChildren(line);
    now.textContent = p.length ? `now ${p[p.length - 1].toFixed(series[i].rate ? 2 : 0)}, max ${Math.max(...p).toFixed(2)}` : "";
  }
}

function auditView(): HTMLElement {
  const inputs = {
    token: h("input", { placeholder: "any" }),
    kind: h("select", {}, ...["", "run", "function", "lint", "tool", "session", "session_exec", "auth"].map((k) => h("option", { value: k }, k || "any"))),
    error_code: h("input", { placeholder: "any" }),
    session: h("input", { placeholder: "any" }),
    limit: h("input", { type: "number", value: "50", min: "1", max: "1000" }),
  };
  const body = h("tbody", { id: "audit-list" });
  const msg = h("p", { class: "meta", id: "audit-msg" });
  const form = h("form", { class: "row" },
    field("Token", inputs.token), field("Kind", inputs.kind), field("Error code", inputs.error_code), field("Session", inputs.session), field("Rows", inputs.limit),
    h("button", { type: "submit" }, "Show"));
  async function load(): Promise<void> {
    const q: Record<string, string> = {};
    for (const [k, el] of Object.entries(inputs)) if (el.value.trim()) q[k] = el.value.trim();
    try {
      const a = await call((c) => c.audit(q));
      clear(body);
      for (const r of a.records) {
        body.append(h("tr", {}, h("td", {}, new Date(r.time).toLocaleString()), h("td", {}, r.token), h("td", {}, r.kind),
          h("td", {}, r.backend ?? ""), h("td", {}, r.reason ?? r.error_code ?? ""), h("td", {}, r.exit_code ?? ""),
          h("td", {}, `${Math.round((r.duration_ns ?? 0) / 1e6)} ms`)));
      }
      msg.textContent = `${a.records.length} of ${a.total} row(s)`;
    } catch (e) {
      msg.textContent = e instanceof ExecboxError && e.status === 403 ? "The audit log needs an admin token." : describe(e);
    }
  }
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    load();
  });
  load();
  return h("div", {}, form, msg,
    h("table", {}, h("thead", {}, h("tr", {}, ...["time", "token", "kind", "backend", "reason / error", "exit", "duration"].map((t) => h("th", {}, t)))), body));
}
