// Builds the playground into ../internal/daemon/webui/dist, which the execbox
// binary embeds: assets under assets/ with content hashes in their names
// (cached long), each with a gzip copy, and index.html naming them.
import * as esbuild from "esbuild";
import { gzipSync } from "node:zlib";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
// PLAYGROUND_OUT builds elsewhere (the test script compares the two).
const out = process.env.PLAYGROUND_OUT || join(here, "..", "internal", "daemon", "webui", "dist");
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "assets"), { recursive: true });

const result = await esbuild.build({
  entryPoints: [join(here, "src", "main.ts")],
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  splitting: true,
  entryNames: "[name]-[hash]",
  chunkNames: "[name]-[hash]",
  outdir: join(out, "assets"),
  metafile: true,
  legalComments: "linked",
  logLevel: "warning",
});

const names = {};
let total = 0, gz = 0;
for (const file of Object.keys(result.metafile.outputs)) {
  const name = basename(file);
  const o = result.metafile.outputs[file];
  if (o.entryPoint?.endsWith("src/main.ts")) {
    names.js = name;
    names.css = o.cssBundle && basename(o.cssBundle);
  }
  const data = readFileSync(file);
  const z = gzipSync(data, { level: 9 });
  writeFileSync(file + ".gz", z);
  total += data.length;
  gz += z.length;
}
if (!names.js || !names.css) throw new Error("esbuild made no JS or no CSS bundle");
// {{nonce}} stays: the server puts a fresh one in each answer.
const html = readFileSync(join(here, "index.html"), "utf8").replace("{{js}}", names.js).replace("{{css}}", names.css);
writeFileSync(join(out, "index.html"), html);
const entry = readFileSync(join(out, "assets", names.js)).length;
console.log(`built ${Object.keys(result.metafile.outputs).length} files: ${total} bytes, ${gz} gzipped; the first load (${names.js}) ${entry} bytes`);
