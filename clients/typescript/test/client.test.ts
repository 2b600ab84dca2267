// Tests against a real `execbox serve` (the binary EXECBOX_BINARY names,
// else one built with go build), on the local backend with a token.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

import { createConfig, lintFromString } from "@redocly/openapi-core";

import { Client, ExecboxError, type TerminalExit } from "../src/index.js";

const TOKEN = "ts-client-secret";
// dist/test, this compiled test's own directory (import.meta.dirname would need Node 20.11).
const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../../../..");
let server: ChildProcess;
let url = "";
let tmp = "";

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), "execbox-ts-"));
  let bin = process.env.EXECBOX_BINARY ?? "";
  if (!bin) {
    bin = join(tmp, "execbox");
    execFileSync("go", ["build", "-o", bin, "./cmd/execbox"], { cwd: root, stdio: "inherit" });
  }
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("EXECBOX_") && v !== undefined) env[k] = v;
  Object.assign(env, {
    EXECBOX_ALLOW_UNISOLATED: "true", EXECBOX_BACKEND: "local", EXECBOX_TOKEN: TOKEN, EXECBOX_LOG_FORMAT: "json",
    EXECBOX_WORK_ROOT: join(tmp, "work"), EXECBOX_AUDIT_PATH: join(tmp, "audit.db"),
  });
  server = spawn(bin, ["serve", "--listen", "127.0.0.1:0"], { env, stdio: ["ignore", "ignore", "pipe"] });
  url = await new Promise<string>((res, rej) => {
    const rl = createInterface({ input: server.stderr! });
    rl.on("line", (line) => {
      try {
        const rec = JSON.parse(line);
        if (rec.msg === "listening") res("http://" + rec.addr);
      } catch { /* not JSON */ }
    });
    server.on("exit", (code) => rej(new Error(`execbox serve exited ${code}`)));
  });
});

after(async () => {
  // The server unmounts what it made under tmp on its way out: wait for
  // it before removing tmp.
  if (server && server.exitCode === null && server.signalCode === null) {
    const exited = new Promise((res) => server.once("exit", res));
    server.kill("SIGTERM");
    await exited;
  }
  rmSync(tmp, { recursive: true, force: true });
});

const c = () => new Client(url, { token: TOKEN });

test("the generated types are the served document's", () => {
  const out = join(tmp, "schema.ts");
  execFileSync("npx", ["openapi-typescript", join(root, "api/v1/openapi.yaml"), "--default-non-nullable", "false", "-o", out], { cwd: resolve(here, "../.."), stdio: "ignore" });
  assert.equal(readFileSync(out, "utf8"), readFileSync(resolve(here, "../../src/schema.ts"), "utf8"),
    "src/schema.ts is stale: npm run generate");
});

// A second validator, not the library the server validates with
// (libopenapi): Redocly's, with its recommended rules, finds no problem
// — error or warning — in the document the server serves.
test("Redocly's recommended rules find no problem in the served document", async () => {
  const source = await (await fetch(url + "/v1/openapi.json")).text();
  const config = await createConfig({ extends: ["recommended"] });
  const problems = await lintFromString({ source, absoluteRef: join(tmp, "openapi.json"), config });
  assert.deepEqual(problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location?.[0]?.pointer}`), []);
});

test("run a command", async () => {
  const r = await c().run({ command: ["sh", "-c", "echo hi; echo err >&2; exit 3"] });
  assert.deepEqual([r.exit_code, r.reason, r.stdout, r.stderr, r.backend], [3, "exited", "hi\n", "err\n", "local"]);
  assert.equal(r.enforcement, undefined);
});

test("run code with files, stdin and explain", async () => {
  const r = await c().run({ code: "import sys\nprint(open('in.txt').read() + sys.stdin.read())", files: { "in.txt": btoa("from a file, ") }, stdin: "from stdin" }, { explain: true });
  assert.equal(r.stdout, "from a file, from stdin\n");
  assert.ok(r.enforcement?.wall);
});

test("a timeout is a result", async () => {
  const r = await c().run({ command: ["sleep", "5"], limits: { wall: "300ms" } });
  assert.equal(r.reason, "timeout");
});

test("stream", async () => {
  const out: string[] = [];
  const err: string[] = [];
  let result;
  for await (const ev of c().runStream({ command: ["sh", "-c", "echo one; echo two >&2; echo three"] })) {
    if (ev.type === "stdout") out.push(new TextDecoder().decode(ev.data));
    else if (ev.type === "stderr") err.push(new TextDecoder().decode(ev.data));
    else result = ev.result;
  }
  assert.equal(out.join(""), "one\nthree\n");
  assert.equal(err.join(""), "two\n");
  assert.equal(result?.exit_code, 0);
});

test("execute and lint", async () => {
  let r = await c().execute({ code: "def main(a, b):\n    print('adding')\n    return a + b\n", params: { a: 2, b: 40 } });
  assert.ok(r.ok);
  assert.equal(r.data, 42);
  assert.equal(r.stdout, "adding\n");
  r = await c().execute({ code: "def main():\n    return 1 / 0\n" });
  assert.equal(r.ok, false);
  assert.equal(r.code, "user_error");
  assert.equal(r.type, "ZeroDivisionError");
  assert.deepEqual(await c().lint({ code: "def f():\n    return 1\n" }), []);
  const d = await c().lint({ code: "def f(:\n    pass\n" });
  assert.equal(d[0].line, 1);
});

test("errors carry the code", async () => {
  await assert.rejects(new Client(url, { token: "wrong" }).run({ command: ["true"] }),
    (e: ExecboxError) => e.code === "unauthenticated" && e.status === 401);
  await assert.rejects(c().run({ command: ["true"], limits: { memory: "lots" } }),
    (e: ExecboxError) => e.code === "invalid_request" && e.status === 400 && e.field === "limits.memory");
  await assert.rejects(c().run({ command: ["true"], min_isolation: "vm" }),
    (e: ExecboxError) => e.code === "isolation_too_weak" && e.status === 403);
  await assert.rejects(new Client("http://127.0.0.1:9").run({ command: ["true"] }),
    (e: ExecboxError) => e.code === "server_unreachable" && e.status === 0);
});

test("the client reads the environment", async () => {
  // As the CLI: EXECBOX_URL and EXECBOX_TOKEN name the server and the token.
  const saved = { url: process.env.EXECBOX_URL, token: process.env.EXECBOX_TOKEN };
  try {
    process.env.EXECBOX_URL = url;
    process.env.EXECBOX_TOKEN = TOKEN;
    assert.equal((await new Client().run({ command: ["true"] })).exit_code, 0);
    process.env.EXECBOX_TOKEN = "wrong";
    await assert.rejects(new Client().run({ command: ["true"] }), (e: ExecboxError) => e.code === "unauthenticated");
    assert.equal((await new Client(undefined, { token: TOKEN }).run({ command: ["true"] })).exit_code, 0);
  } finally {
    for (const [k, v] of [["EXECBOX_URL", saved.url], ["EXECBOX_TOKEN", saved.token]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});

// Tools run in an isolating backend (the local one mounts no tools dir):
// native, which needs root.
test("tools and approvals", { skip: process.getuid?.() !== 0 && "native needs root" }, async () => {
  const list = await c().tools({ backend: "native" });
  assert.deepEqual(list.tools.map((t) => t.name), ["http_fetch", "python", "read_file", "write_file"]);
  const r = await c().runTool("python", { args: { code: "x = 6\nx * 7" }, backend: "native" });
  assert.ok(r.ok && r.backend === "native");
  assert.equal((r.result as { value: number }).value, 42);
  const f = await c().runTool("http_fetch", { args: { url: "http://127.0.0.1:9/" }, backend: "native" });
  assert.ok(!f.ok && f.error?.code === "network_disabled");
  await assert.rejects(c().runTool("python", { args: { code: 3 }, backend: "native" }),
    (e: ExecboxError) => e.code === "tool_args_invalid" && e.status === 400);
  assert.deepEqual(await c().approvals(), []);
  await assert.rejects(c().decide("0".repeat(32), true), (e: ExecboxError) => e.code === "approval_not_found" && e.status === 404);
});

test("health and backends", async () => {
  // The server runs on local, named: the report says so, and lists local
  // as ready and allowed although unisolated.
  const h = await c().health();
  assert.deepEqual([h.configured, h.backend, h.isolation], ["local", "local", "none"]);
  const local = (h.candidates ?? []).filter((x) => x.name === "local");
  assert.equal(local.length, 1, JSON.stringify(h.candidates));
  assert.deepEqual([local[0].available, local[0].ready, local[0].unisolated, local[0].allowed], [true, true, true, true]);
  const b = await c().backends();
  assert.ok(b.some((x) => x.name === "local"));
});

test("a session keeps its files across execs", async () => {
  const s = await c().createSession({ labels: { t: "ts" }, idle_timeout: 120 });
  try {
    assert.equal(s.info.backend, "local");
    for (const i of [1, 2, 3]) {
      const r = await s.exec({ command: ["sh", "-c", "echo x >> n; wc -l < n"] });
      assert.equal(r.stdout.trim(), String(i));
    }
    const blob = new Uint8Array(3 * 1024 * 1024).map((_, i) => (i * 7) & 255); // over the JSON body bound
    const fi = await s.putFile("d/blob.bin", blob);
    assert.equal(fi.size, blob.length);
    assert.deepEqual(await s.getFile("d/blob.bin"), blob);
    await s.putFile("d/t.txt", "text");
    assert.equal((await s.exec({ code: "print(open('d/t.txt').read())" })).stdout, "text\n");
    assert.deepEqual((await s.list("d")).map((e) => e.path), ["d/blob.bin", "d/t.txt"]);
    assert.equal((await s.stat()).type, "dir");
    const up = await s.upload([{ path: "a.txt", data: "alpha" }, { path: "sub/b.bin", data: blob }], "u");
    assert.deepEqual(up.map((e) => [e.path, e.size]), [["u/a.txt", 5], ["u/sub/b.bin", blob.length]]);
    assert.deepEqual(await s.getFile("u/sub/b.bin"), blob);
    await assert.rejects(s.upload([{ path: "../x", data: "x" }]), (e: ExecboxError) => e.code === "path_invalid");
    await s.mkdir("e/f");
    await s.remove("d");
    await assert.rejects(s.stat("d"), (e: ExecboxError) => e.code === "file_not_found" && e.status === 404);
    await assert.rejects(s.getFile("../x"), (e: ExecboxError) => e.code === "path_invalid");
    assert.ok((await c().sessions()).some((x) => x.id === s.id));
  } finally {
    await s.close();
  }
  await s.close(); // closing a closed session succeeds
  await assert.rejects(s.exec({ command: ["true"] }), (e: ExecboxError) => e.code === "session_closed" && e.status === 404);
});

test("contexts keep state, terminals run programs (the Python client's surface)", async () => {
  const s = await c().createSession({ idle_timeout: 120 });
  try {
    await s.runCode("import math\nr = 2\ndef area(x):\n    return math.pi * x * x");
    const out = await s.runCode("print('hi')\n{'a': round(area(r), 2)}");
    assert.ok(out.ok);
    assert.deepEqual(out.value, { a: 12.57 });
    assert.equal(out.stdout, "hi\n");
    assert.equal(out.type, "dict");
    const err = await s.runCode("1/0");
    assert.equal(err.ok, false);
    assert.equal(err.error?.type, "ZeroDivisionError");
    assert.equal(err.context, out.context);
    const loop = await s.runCode("while True:\n    r += 0", { timeout: 1 });
    assert.ok(loop.interrupted);
    assert.equal((await s.runCode("r")).value, 2);
    const js = await s.runCode("let n = 6; n * 7", { language: "javascript" });
    assert.equal(js.value, 42);
    assert.notEqual(js.context, out.context);
    assert.deepEqual((await s.contexts()).map((x) => x.id), [out.context, js.context]);
    await s.resetContext(out.context);
    assert.equal((await s.runCode("'r' in dir()")).value, false);
    await s.deleteContext(out.context);
    assert.equal((await s.runCode("7 * 6")).value, 42);

    const term = await s.openTerminal({ command: ["sh", "-c", "stty size; read line; echo got:$line; exit 3"], rows: 30, cols: 100 });
    assert.ok((await s.terminals()).some((x) => x.id === term.id));
    let shown = "";
    let exit: TerminalExit | undefined;
    for await (const ev of s.terminalOutput(term.id)) {
      if (ev.type === "output") {
        shown += ev.text;
        if (shown.includes("30 100") && !shown.includes("typed")) {
          await s.terminalInput(term.id, "typed\n");
          shown += "typed";
        }
      } else {
        exit = ev.exit;
      }
    }
    assert.match(shown, /got:typed/);
    assert.equal(exit?.exit_code, 3);
    assert.equal((await s.terminal(term.id)).exit?.exit_code, 3);
  } finally {
    await s.close();
  }
});

test("stream chunks decode themselves", async () => {
  const chunks: string[] = [];
  for await (const ev of c().runStream({ command: ["sh", "-c", "printf 'h\\303\\251'"] })) {
    if (ev.type === "stdout") chunks.push(ev.text);
    else if (ev.type === "result") assert.ok(ev.result.usage.wall_ns > 0); // usage is always there
  }
  assert.equal(chunks.join(""), "hé");
});
