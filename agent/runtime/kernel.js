// execbox JavaScript context kernel: runs cells in one vm context, like a
// notebook. Calls arrive as JSON lines on stdin ({"code", "timeout"}); each
// answer is one JSON line on fd 3. A cell's timeout is vm's own (and the
// agent's SIGINT a second later breaks it too): the context lives on. A cell whose value
// is a promise is awaited, within what is left of its timeout.
"use strict";
const fs = require("fs");
const vm = require("vm");
const util = require("util");

const MAX_VALUE = 1 << 20;
const MAX_REPR = 64 * 1024;
const sandbox = { console, require, process, Buffer, setTimeout, clearTimeout, setInterval, clearInterval, queueMicrotask };
sandbox.globalThis = sandbox;
const context = vm.createContext(sandbox);
process.on("SIGINT", () => {}); // outside a cell an interrupt is ignored

function answer(obj) {
  fs.writeSync(3, JSON.stringify(obj) + "\n");
}

function valueOf(v) {
  const out = { repr: util.inspect(v, { depth: 4 }).slice(0, MAX_REPR), type: v === null ? "null" : typeof v };
  try {
    const text = JSON.stringify(v);
    if (text !== undefined && text.length <= MAX_VALUE) out.value = JSON.parse(text);
  } catch (e) {
    // Not JSON: the repr stays.
  }
  return out;
}

function errorOf(e, timedOut) {
  if (timedOut) return { type: "TimeoutError", message: "the call was interrupted at its timeout" };
  if (e instanceof Error || (e && typeof e === "object" && "stack" in e)) {
    return { type: String(e.name || "Error").slice(0, 256), message: String(e.message).slice(0, MAX_REPR), traceback: String(e.stack || "").slice(-MAX_REPR) };
  }
  return { type: "Error", message: util.inspect(e).slice(0, MAX_REPR) };
}

async function call(req) {
  const ms = Math.max(1, Math.floor(req.timeout * 1000));
  const start = Date.now();
  let v;
  try {
    v = vm.runInContext(req.code, context, { filename: "<cell>", timeout: ms, breakOnSigint: true });
    if (v && typeof v.then === "function") {
      let timer;
      const left = Math.max(1, ms - (Date.now() - start));
      const late = new Promise((_, reject) => { timer = setTimeout(() => reject(Object.assign(new Error("timeout"), { code: "ERR_SCRIPT_EXECUTION_TIMEOUT" })), left); });
      try {
        v = await Promise.race([v, late]);
      } finally {
        clearTimeout(timer);
      }
    }
  } catch (e) {
    const timedOut = e && (e.code === "ERR_SCRIPT_EXECUTION_TIMEOUT" || e.code === "ERR_SCRIPT_EXECUTION_INTERRUPTED");
    return { ok: false, error: errorOf(e, timedOut), interrupted: timedOut || undefined };
  }
  const ans = { ok: true };
  if (v !== undefined) Object.assign(ans, valueOf(v));
  return ans;
}

let buf = "";
let queue = Promise.resolve();
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buf += chunk;
  let i;
  while ((i = buf.indexOf("\n")) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    queue = queue.then(() => call(JSON.parse(line))).then(answer);
  }
});
process.stdin.on("end", () => process.exit(0));
