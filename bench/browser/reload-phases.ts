/**
 * Reload → first resumed step, phase by phase in the worker (decision 0116): `npx tsx bench/browser/reload-phases.ts
 * [variant:live,...] [rounds]`. Builds this tree's bench page, seeds each configuration (a pool of its own), reloads
 * them in turns (two reloads a turn), and prints for each shape the median length of every phase between two of the
 * worker's `performance.mark`s (taken run by run, then the median), and a few spans. A diagnostic, not part of
 * `npm run bench`; compare shapes measured in the same run, and only the phases that grow with the live tasks.
 *
 * The bench worker marks its script, each status and the hot task's first phase and commit. The library marks
 * nothing: for the phases inside the open (the wasm, the pool, the check, the live read, the recovery, the mirror,
 * the first pass), apply the marks first and take them out after:
 *   git apply bench/browser/reload-phases.patch && npx tsx bench/browser/reload-phases.ts; git apply -R bench/browser/reload-phases.patch
 * `BENCH_CHROMIUM_ARGS="--js-flags=--no-liftoff"` (say) passes flags to Chromium.
 */
import { build } from "vite";
import { DIST, launchChromium, serveStatic, waitInPage } from "./support.ts";

const variants = (process.argv[2] ?? "stalled:10000,sleeping:10000,sleeping:1").split(",").map((s) => {
  const [v, n] = s.split(":");
  return { variant: v!, live: Number(n) };
});
const rounds = Number(process.argv[3] ?? 4);
const out = `${DIST}/phases`;
await build({
  configFile: new URL("./vite.config.ts", import.meta.url).pathname,
  logLevel: "error",
  build: { outDir: out, emptyOutDir: true },
});
const server = await serveStatic(out, { cache: "none" });
const browser = await launchChromium();
const page = await browser.newPage();
const url = (c: { variant: string; live: number }) => {
  const q = new URLSearchParams({ mode: "harness", path: "/recovery.sqlite3", pool: `ph-${c.variant}-${c.live}` });
  if (c.variant === "stalled") q.set("noRestartLimit", "1");
  return `${server.url}?${q}`;
};
for (const c of variants) {
  await page.goto(url(c));
  await waitInPage(page, () => window.bench?.status === "ready" || window.bench?.status === "failed", 60_000);
  await page.evaluate(([o, k]) => window.bench.client!.call("seed", o, k), [c.live - 1, c.variant] as const);
  await waitInPage(page, () => window.bench.firstStepSeen !== undefined);
}
const seen: Record<string, Record<string, number[]>> = {};
for (let r = 0; r < rounds; r++) {
  for (const c of variants) {
    await page.goto(url(c));
    await waitInPage(page, () => window.bench?.firstStepSeen !== undefined, 120_000);
    for (let k = 0; k < 2; k++) {
      await page.waitForTimeout(200);
      await page.reload();
      await waitInPage(page, () => window.bench?.firstStepSeen !== undefined, 120_000);
      await page.waitForTimeout(100);
      const marks = await page.evaluate(async () => {
        const t = await window.bench.client!.call<{ workerOrigin: number }>("timings");
        const m = await window.bench.client!.call<[string, number][]>("marks");
        const shift = t.workerOrigin - performance.timeOrigin;
        const first: Record<string, number> = {};
        for (const [name, at] of m) first[name] ??= at + shift;
        const nav = performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming;
        first["page:responseEnd"] = nav.responseEnd;
        first["worker:origin"] = shift;
        first["page:nav"] = 0;
        return first;
      });
      const key = `${c.variant}${c.live}`;
      const s = (seen[key] ??= {});
      for (const [n, at] of Object.entries(marks)) (s[n] ??= []).push(at);
    }
  }
  process.stderr.write(`round ${r + 1}\n`);
}
const med = (a: number[]) => {
  const s = [...a].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)]!;
};
const keys = Object.keys(seen);
// Phase lengths: each mark's time less the previous mark's (in the first shape's order), run by run, then the median.
const order = Object.keys(seen[keys[0]!]!)
  .filter((n) => !n.startsWith("page:"))
  .sort((a, b) => med(seen[keys[0]!]![a]!) - med(seen[keys[0]!]![b]!));
console.log("phase (ms, median of runs)".padEnd(40), keys.map((k) => k.padStart(14)).join(""));
for (let i = 1; i < order.length; i++) {
  const cells = keys.map((k) => {
    const a = seen[k]![order[i - 1]!];
    const b = seen[k]![order[i]!];
    if (!a || !b || a.length !== b.length) return "-".padStart(14);
    return med(b.map((x, j) => x - a[j]!))
      .toFixed(1)
      .padStart(14);
  });
  console.log(`${order[i - 1]} → ${order[i]}`.padEnd(40), cells.join(""));
}
const span = (k: string, from: string, to: string) => {
  const a = seen[k]![from]!;
  return seen[k]![to]!.map((x, j) => x - a[j]!);
};
for (const [from, to] of [
  ["page:nav", "worker:origin"],
  ["page:nav", "hot:committed"],
  ["worker:origin", "hot:committed"],
  ["status:opening", "hot:committed"],
  ["check:start", "check:end"],
  ["status:recovering", "hot:committed"],
] as const)
  if (keys.every((k) => seen[k]![from] && seen[k]![to]))
    console.log(
      `${from} → ${to}`.padEnd(40),
      keys
        .map((k) =>
          med(span(k, from, to))
            .toFixed(1)
            .padStart(14),
        )
        .join(""),
    );
console.log("\nruns of hot:committed (page clock):");
for (const k of keys) console.log(k.padEnd(16), (seen[k]!["hot:committed"] ?? []).map((x) => x.toFixed(0)).join(","));
await browser.close();
await server.close();
process.exit(0);
