/**
 * The Node benchmarks measure the code as users ship it: bundled (esbuild, as Vite and other bundlers do),
 * not as a TypeScript loader runs it. tsx compiles with `keepNames`, which wraps every closure the hot path
 * creates in a naming call — a cost no production bundle pays (about 2–4 µs per commit, a third of a step).
 */

import { mkdirSync } from "node:fs";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";

const ROOT = new URL("..", import.meta.url).pathname;

export async function importBundled<T>(entry: string): Promise<T> {
  const outdir = join(ROOT, ".tmp", "bench-node");
  mkdirSync(outdir, { recursive: true });
  const outfile = join(outdir, `${basename(entry, ".ts")}.mjs`);
  await build({
    entryPoints: [join(ROOT, entry)],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // Packages load their own files (sqlite-wasm its .wasm) relative to themselves: leave them in node_modules.
    packages: "external",
    logLevel: "warning",
  });
  return (await import(pathToFileURL(outfile).href)) as T;
}

/** `tsx bench/bundled.ts kernel|agent`: runs one Node benchmark bundled, prints its table, writes its JSON. */
if (import.meta.url === `file://${process.argv[1]}`) {
  const which = process.argv[2];
  const { writeFileSync } = await import("node:fs");
  if (which === "kernel") {
    const { benchKernel } = await importBundled<typeof import("./kernel.ts")>("bench/kernel.ts");
    const { result, printed } = await benchKernel();
    console.log(printed);
    console.log(`\ntarget ≤ 2.5×: ${result.meetsTarget ? "met" : "NOT met"} (${result.ratio.toFixed(2)}×)`);
    writeFileSync(join(ROOT, "bench", "results-kernel.json"), `${JSON.stringify(result, null, 2)}\n`);
  } else if (which === "agent") {
    const { benchAgent } = await importBundled<typeof import("./agent.ts")>("bench/agent.ts");
    const { result, printed } = await benchAgent();
    console.log(printed);
    writeFileSync(join(ROOT, "bench", "results-agent.json"), `${JSON.stringify(result, null, 2)}\n`);
  } else {
    console.error("usage: tsx bench/bundled.ts kernel|agent");
    process.exit(2);
  }
}
