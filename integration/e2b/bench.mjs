// A benchmark, side by side in one run: from a new sandbox to the first
// output of a command in it, through the official E2B SDK
// (Sandbox.create, then commands.run with onStdout) and through execbox's
// own TypeScript client (createSession, then execStream), against one
// real execbox serve per backend (E2B_BENCH_BACKENDS, default native),
// interleaved round by round. The TypeScript client must be built
// (clients/typescript: npm ci && npm run build). Closing is not timed.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

import { Sandbox } from "e2b";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const { Client } = await import(join(root, "clients/typescript/dist/src/index.js"));
const TOKEN = "bench-secret";
const rounds = Number(process.env.E2B_BENCH_ROUNDS || 20);
const backends = (process.env.E2B_BENCH_BACKENDS || "native").split(",").filter(Boolean);

const tmp = mkdtempSync(join(tmpdir(), "execbox-e2b-bench-"));
let bin = process.env.EXECBOX_BINARY ?? "";
if (!bin) {
  bin = join(tmp, "execbox");
  execFileSync("go", ["build", "-o", bin, "./cmd/execbox"], { cwd: root, stdio: "inherit" });
}

async function serve(backend) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("EXECBOX_") && !k.startsWith("E2B_")) env[k] = v;
  Object.assign(env, { EXECBOX_BACKEND: backend, EXECBOX_TOKEN: TOKEN, EXECBOX_LOG_FORMAT: "json",
    EXECBOX_WORK_ROOT: mkdtempSync(join(tmp, backend + "-")) });
  const server = spawn(bin, ["serve", "--listen", "127.0.0.1:0"], { env, stdio: ["ignore", "ignore", "pipe"] });
  const url = await new Promise((res, rej) => {
    createInterface({ input: server.stderr }).on("line", (line) => {
      try {
        const rec = JSON.parse(line);
        if (rec.msg === "listening") res("http://" + rec.addr);
      } catch { /* not JSON */ }
    });
    server.on("exit", (code) => rej(new Error(`execbox serve exited ${code}`)));
  });
  return { url, stop: () => new Promise((r) => { server.once("exit", r); server.kill("SIGTERM"); }) };
}

// One round of each way: the milliseconds to the first output.
async function viaSDK(url) {
  const opts = { apiUrl: url + "/e2b", sandboxUrl: url + "/e2b", apiKey: TOKEN };
  const t0 = performance.now();
  const sbx = await Sandbox.create(opts);
  let first = 0;
  await sbx.commands.run("echo first", { onStdout: () => { first ||= performance.now(); } });
  const ms = first - t0;
  await sbx.kill();
  return ms;
}

async function viaClient(url) {
  const c = new Client(url, { token: TOKEN });
  const t0 = performance.now();
  const s = await c.createSession({});
  let first = 0;
  for await (const ev of s.execStream({ command: ["sh", "-c", "echo first"] })) {
    if (!first && ev.text) first = performance.now();
  }
  const ms = first - t0;
  await s.close();
  return ms;
}

const q = (xs, p) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))];
console.log(`new sandbox → first output of a command, ${rounds} rounds interleaved (ms)`);
console.log("backend     way                         p50      p99     mean");
for (const backend of backends) {
  const srv = await serve(backend);
  try {
    const ways = { "E2B SDK (e2b 2.51.0)": viaSDK, "execbox TypeScript client": viaClient };
    const times = Object.fromEntries(Object.keys(ways).map((k) => [k, []]));
    for (const f of Object.values(ways)) await f(srv.url); // warm up
    for (let i = 0; i < rounds; i++) {
      for (const [k, f] of Object.entries(ways)) times[k].push(await f(srv.url));
    }
    for (const [k, xs] of Object.entries(times)) {
      xs.sort((a, b) => a - b);
      const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
      console.log(`${backend.padEnd(11)} ${k.padEnd(27)} ${q(xs, 0.5).toFixed(1).padStart(7)} ${q(xs, 0.99).toFixed(1).padStart(8)} ${mean.toFixed(1).padStart(8)}`);
    }
  } finally {
    await srv.stop();
  }
}
rmSync(tmp, { recursive: true, force: true });
