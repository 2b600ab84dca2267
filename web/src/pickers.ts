// Where a call runs: auto, a backend by name, or a tier.
import { call } from "./api.ts";
import { field, h } from "./dom.ts";

type Tier = "strict" | "standard" | "fast";

export function backendPicker(prefix: string): { element: HTMLElement; selection(): { backend?: string; tier?: Tier } } {
  const select = h("select", { id: `${prefix}-backend` },
    h("option", { value: "" }, "auto"),
    h("optgroup", { label: "tier" }, ...["strict", "standard", "fast"].map((t) => h("option", { value: `tier:${t}` }, t))));
  const backends = h("optgroup", { label: "backend" });
  select.append(backends);
  call((c) => c.backends()).then((list) => {
    for (const b of list) {
      const o = h("option", { value: b.name, disabled: !b.available || !b.allowed }, `${b.name} (${b.isolation})`);
      if (!b.available || !b.allowed) o.title = b.reason ?? "";
      backends.append(o);
    }
  }).catch(() => {});
  return {
    element: field("Backend", select),
    selection() {
      const v = select.value;
      if (!v) return {};
      return v.startsWith("tier:") ? { tier: v.slice(5) as Tier } : { backend: v };
    },
  };
}
