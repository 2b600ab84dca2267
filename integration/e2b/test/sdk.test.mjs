// The official E2B SDKs (e2b, @e2b/code-interpreter; the versions
// package.json pins), unchanged, against a real `execbox serve` on each
// backend E2B_BACKENDS names (default native): pointed at it only by
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY, as the README says. Each
// test asserts what the SDK returns, as its user would read it.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

import { Sandbox, CommandExitError, TimeoutError, NotFoundError, SandboxNotFoundError } from "e2b";
import { Sandbox as CodeSandbox } from "@e2b/code-interpreter";

const ALICE = "alice-e2b-secret";
const BOB = "bob-e2b-secret";
const root = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const backends = (process.env.E2B_BACKENDS || "native").split(",").filter(Boolean);
const sha = (s) => createHash("sha256").update(s).digest("hex");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const enc = (s) => new TextEncoder().encode(s);

let bin = process.env.EXECBOX_BINARY ?? "";
let tmp = "";
before(() => {
  tmp = mkdtempSync(join(tmpdir(), "execbox-e2b-"));
  if (!bin) {
    bin = join(tmp, "execbox");
    execFileSync("go", ["build", "-o", bin, "./cmd/execbox"], { cwd: root, stdio: "inherit" });
  }
});
after(() => rmSync(tmp, { recursive: true, force: true }));

// serve starts execbox serve on backend with two tokens, alice and bob;
// it answers the server's E2B URL and a stop.
async function serve(backend) {
  const dir = mkdtempSync(join(tmp, backend + "-"));
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("EXECBOX_") && !k.startsWith("E2B_")) env[k] = v;
  Object.assign(env, { EXECBOX_BACKEND: backend, EXECBOX_LOG_FORMAT: "json", EXECBOX_WORK_ROOT: join(dir, "work") });
  // Each background process holds a run slot while it runs.
  const server = spawn(bin, ["serve", "--listen", "127.0.0.1:0", "--set", "server.max_runs=16",
    "--set", `auth.tokens=alice:${sha(ALICE)},bob:${sha(BOB)}`], { env, stdio: ["ignore", "ignore", "pipe"] });
  const log = [];
  const url = await new Promise((res, rej) => {
    const rl = createInterface({ input: server.stderr });
    rl.on("line", (line) => {
      log.push(line);
      try {
        const rec = JSON.parse(line);
        if (rec.msg === "listening") res("http://" + rec.addr + "/e2b");
      } catch { /* not JSON */ }
    });
    server.on("exit", (code) => rej(new Error(`execbox serve exited ${code}:\n${log.join("\n")}`)));
  });
  const stop = async () => {
    if (server.exitCode === null && server.signalCode === null) {
      const exited = new Promise((r) => server.once("exit", r));
      server.kill("SIGTERM");
      await exited;
    }
  };
  return { url, stop };
}

for (const backend of backends) {
  describe(`the E2B SDKs on ${backend}`, () => {
    let srv;
    let sbx; // alice's code interpreter sandbox, shared by the tests below
    before(async () => {
      srv = await serve(backend);
      // The three variables the README gives, as a user sets them.
      process.env.E2B_API_URL = srv.url;
      process.env.E2B_SANDBOX_URL = srv.url;
      process.env.E2B_API_KEY = ALICE;
      sbx = await CodeSandbox.create({ timeoutMs: 10 * 60_000, metadata: { suite: "sdk", backend } });
    });
    after(async () => {
      await sbx?.kill().catch(() => {});
      await srv?.stop();
    });

    test("commands.run in the foreground: stdout, stderr, exit code, env and cwd", async () => {
      const r = await sbx.commands.run("echo out; echo err >&2; echo $GREETING; pwd", { envs: { GREETING: "hi" } });
      assert.equal(r.exitCode, 0);
      assert.equal(r.stdout, "out\nhi\n/work\n");
      assert.equal(r.stderr, "err\n");
      await sbx.files.makeDir("sub");
      assert.equal((await sbx.commands.run("pwd", { cwd: "/work/sub" })).stdout, "/work/sub\n");
      await assert.rejects(sbx.commands.run("echo failing; exit 7"), (e) => e instanceof CommandExitError && e.exitCode === 7 && e.stdout === "failing\n");
    });

    test("commands.run with stdin, sent and closed", async () => {
      const h = await sbx.commands.run("tr a-z A-Z", { background: true, stdin: true });
      await sbx.commands.sendStdin(h.pid, "piped in\n");
      await sbx.commands.closeStdin(h.pid);
      const r = await h.wait();
      assert.equal(r.stdout, "PIPED IN\n");
    });

    test("commands.run past its timeout ends with the SDK's TimeoutError", async () => {
      const t0 = Date.now();
      await assert.rejects(sbx.commands.run("sleep 30", { timeoutMs: 1500 }), (e) => e instanceof TimeoutError);
      assert.ok(Date.now() - t0 < 15_000, "the timeout ended the command");
      // Killed at the same deadline, apart from the stream that ended.
      let left = [];
      for (let i = 0; i < 50; i++, await sleep(100)) {
        left = (await sbx.commands.list()).filter((p) => p.args.includes("sleep 30"));
        if (left.length === 0) break;
      }
      assert.deepEqual(left, [], "the command was killed");
    });

    test("commands.run in the background: listed, waited for, killed", async () => {
      const h = await sbx.commands.run("echo started; sleep 0.5; echo done", { background: true });
      assert.equal((await h.wait()).stdout, "started\ndone\n");
      const long = await sbx.commands.run("sleep 60", { background: true, timeoutMs: 0 });
      const listed = await sbx.commands.list();
      assert.ok(listed.some((p) => p.pid === long.pid && p.cmd === "/bin/bash" && p.args.at(-1) === "sleep 60"), JSON.stringify(listed));
      assert.equal(await long.kill(), true);
      await assert.rejects(long.wait(), (e) => e instanceof CommandExitError);
      assert.ok(!(await sbx.commands.list()).some((p) => p.pid === long.pid));
      assert.equal(await sbx.commands.kill(long.pid), false, "a process that ended is not found");
      // Followed again from elsewhere.
      const again = await sbx.commands.run("sleep 1; echo later", { background: true });
      const followed = await sbx.commands.connect(again.pid);
      assert.equal((await followed.wait()).stdout, "later\n");
    });

    test("files: write, read, list, exists, makeDir, remove", async () => {
      const info = await sbx.files.write("notes/a.txt", "alpha");
      assert.equal(info.path, "/work/notes/a.txt");
      await sbx.files.write("/work/notes/b.bin", new Uint8Array([0, 1, 2, 255]).buffer);
      assert.equal(await sbx.files.read("/work/notes/a.txt"), "alpha");
      assert.deepEqual([...await sbx.files.read("notes/b.bin", { format: "bytes" })], [0, 1, 2, 255]);
      assert.equal((await sbx.commands.run("cat /work/notes/a.txt")).stdout, "alpha", "a command sees the written file");
      const names = (await sbx.files.list("notes")).map((e) => `${e.name}:${e.type}`).sort();
      assert.deepEqual(names, ["a.txt:file", "b.bin:file"]);
      assert.equal(await sbx.files.exists("notes/a.txt"), true);
      assert.equal(await sbx.files.exists("notes/none"), false);
      assert.equal(await sbx.files.makeDir("made/deep"), true);
      assert.equal(await sbx.files.makeDir("made/deep"), false, "an existing directory");
      assert.equal((await sbx.files.getInfo("made")).type, "dir");
      await sbx.files.remove("notes");
      assert.equal(await sbx.files.exists("notes/a.txt"), false);
      await assert.rejects(sbx.files.read("/etc/hostname"), /outside the work dir/);
    });

    test("files.watchDir sees a file written", async () => {
      const events = [];
      await sbx.files.makeDir("watched");
      const w = await sbx.files.watchDir("watched", (e) => events.push(e), { recursive: true });
      await sbx.commands.run("echo x > /work/watched/new.txt");
      for (let i = 0; i < 50 && !events.some((e) => e.name === "new.txt"); i++) await sleep(100);
      await w.stop();
      assert.ok(events.some((e) => e.name === "new.txt" && e.type === "create"), JSON.stringify(events));
    });

    test("pty: create, sendInput, resize, kill", async () => {
      let out = "";
      const dec = new TextDecoder();
      const t = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d); } });
      const until = async (s) => {
        for (let i = 0; i < 100 && !out.includes(s); i++) await sleep(100);
        assert.ok(out.includes(s), `${JSON.stringify(s)} not in ${JSON.stringify(out)}`);
      };
      await sbx.pty.sendInput(t.pid, enc("stty size; echo mark$((40+2))\n"));
      await until("mark42");
      await until("24 80");
      await sbx.pty.resize(t.pid, { cols: 101, rows: 33 });
      await sbx.pty.sendInput(t.pid, enc("stty size\n"));
      await until("33 101");
      assert.equal(await sbx.pty.kill(t.pid), true);
      await assert.rejects(t.wait());
    });

    test("runCode: a value, stdout, state across calls, an error with its traceback, a context of its own, JavaScript", async () => {
      const ex = await sbx.runCode("n = 40\nprint('printed')\nn + 2");
      assert.equal(ex.text, "42");
      assert.equal(ex.logs.stdout.join(""), "printed\n"); // in chunks as they came
      assert.equal(ex.error, undefined);
      assert.equal((await sbx.runCode("n")).text, "40", "state across calls");
      const bad = await sbx.runCode("1 / 0");
      assert.equal(bad.error.name, "ZeroDivisionError");
      assert.equal(bad.error.value, "division by zero");
      assert.match(bad.error.traceback, /Traceback/);
      const ctx = await sbx.createCodeContext();
      const own = await sbx.runCode("n", { context: ctx });
      assert.equal(own.error?.name, "NameError", "a context of its own has no n");
      assert.ok((await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
      await sbx.removeCodeContext(ctx);
      assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
      const js = await sbx.runCode("let q = 20; console.log('from js'); [q, q + 1]", { language: "javascript" });
      if (backend === "docker") {
        // The docker backend's image has no node: said as the execution's error.
        assert.equal(js.error?.name, "language_unavailable");
        assert.match(js.error.value, /cannot run javascript/);
        return;
      }
      assert.deepEqual(js.results[0].json, [20, 21]);
      assert.equal(js.logs.stdout.join(""), "from js\n");
      assert.equal((await sbx.runCode("q * 2", { language: "js" })).text, "40", "the language's own default context");
    });

    test("Sandbox.list, getInfo, setTimeout, connect, kill", async () => {
      const meta = { suite: "life cycle", owner: "a@b.c/d&e=f" }; // what the SDK encodes twice
      const other = await Sandbox.create({ timeoutMs: 60_000, metadata: meta });
      const mine = (await Sandbox.list({ query: { metadata: meta } }).nextItems()).map((s) => s.sandboxId);
      assert.deepEqual(mine, [other.sandboxId]);
      assert.deepEqual((await other.getInfo()).metadata, meta);
      const before = (await other.getInfo()).endAt.getTime();
      await other.setTimeout(5 * 60_000);
      const moved = (await other.getInfo()).endAt.getTime();
      assert.ok(moved > before + 60_000);
      await Sandbox.connect(other.sandboxId, { timeoutMs: 1_000 });
      assert.equal((await other.getInfo()).endAt.getTime(), moved, "a connect never shortens a sandbox's life");
      const same = await Sandbox.connect(other.sandboxId);
      assert.equal((await same.commands.run("echo connected")).stdout, "connected\n");
      assert.equal(await other.kill(), true);
      assert.equal(await Sandbox.kill(other.sandboxId), false, "killed once");
      assert.ok(!(await Sandbox.list().nextItems()).some((s) => s.sandboxId === other.sandboxId));
    });

    test("a sandbox's timeout ends it", async () => {
      const short = await Sandbox.create({ timeoutMs: 2_000 });
      assert.equal((await short.commands.run("echo alive")).stdout, "alive\n");
      await sleep(4_000);
      assert.equal(await short.isRunning(), false);
      await assert.rejects(Sandbox.getInfo(short.sandboxId), (e) => e instanceof NotFoundError || /not found/.test(e.message));
    });

    test("another token sees nothing of the sandbox", async () => {
      const opts = { apiKey: BOB };
      assert.ok(!(await Sandbox.list(opts).nextItems()).some((s) => s.sandboxId === sbx.sandboxId));
      await assert.rejects(Sandbox.getInfo(sbx.sandboxId, opts), /not found/);
      await assert.rejects(Sandbox.connect(sbx.sandboxId, opts), /not found/);
      await assert.rejects(Sandbox.setTimeout(sbx.sandboxId, 1000, opts), /not found/);
      assert.equal(await Sandbox.kill(sbx.sandboxId, opts), false);
      // Bob's own sandbox's access token does not open Alice's: a Sandbox
      // made as connect makes one, Alice's id with Bob's access token.
      const bobs = await Sandbox.create({ ...opts, timeoutMs: 60_000 });
      const forged = new Sandbox({ sandboxId: sbx.sandboxId, envdAccessToken: bobs.envdAccessToken, envdVersion: "0.5.2", ...opts });
      await assert.rejects(forged.commands.run("echo in"), (e) => e instanceof SandboxNotFoundError);
      await assert.rejects(forged.files.read("x"), (e) => e instanceof TimeoutError);
      assert.equal(await forged.isRunning(), false);
      await bobs.kill();
      assert.equal((await sbx.commands.run("echo still")).stdout, "still\n", "Alice's sandbox is unharmed");
      await assert.rejects(Sandbox.create({ apiKey: "not-a-token" }), /credentials|not valid/);
    });

    test("what execbox cannot do yet is refused with a clear error", async () => {
      await assert.rejects(Sandbox.create("some-template"), /template "some-template" is unknown/);
      await assert.rejects(Sandbox.create({ allowInternetAccess: true }), /no network/);
      await assert.rejects(sbx.betaPause(), /501.*pause/);
    });
  });
}
