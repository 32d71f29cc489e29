/**
 * Reload → first resumed step, two builds side by side (decision 0080): `npx tsx bench/browser/ab-reload.ts <baseline
 * checkout> [variant:live,...] [rounds]`. Builds the bench page from the baseline checkout (A: a worktree of the
 * commit before, its node_modules linked) and from this tree (B), serves each on an origin of its own (so each has
 * its own OPFS), seeds each configuration on both, then reloads them in turns in one Chromium — A then B in odd
 * rounds, B then A in even ones, two reloads each — and prints each side's median and phases. A diagnostic, not
 * part of `npm run bench`: judge a reload change by this, on a quiet machine, not by a profile's self time.
 * `AB_CACHE=A`, `B` or `AB`: that side's hashed assets are served cacheable, as a deployed Vite app's are (decision
 * 0104); by default both are `no-store`, as in `npm run bench`.
 */
import type { Page } from "playwright-core";
import { build } from "vite";
import type { RecoveryTimeline } from "./app/main.ts";
import { launchChromium, serveStatic, waitInPage } from "./support.ts";

const baseDir = process.argv[2]!;
const variants = (process.argv[3] ?? "stalled:10000,sleeping:10000,sleeping:1").split(",").map((s) => {
  const [v, n] = s.split(":");
  return { variant: v!, live: Number(n) };
});
const rounds = Number(process.argv[4] ?? 6);
const OUT = new URL("../../.tmp/bench-ab", import.meta.url).pathname;
async function buildAt(root: string, out: string) {
  await build({ configFile: `${root}/bench/browser/vite.config.ts`, logLevel: "error", build: { outDir: out, emptyOutDir: true } });
}
await buildAt(baseDir, `${OUT}/a`);
await buildAt(new URL("../..", import.meta.url).pathname, `${OUT}/b`);
const cached = process.env.AB_CACHE ?? "";
const servers = {
  A: await serveStatic(`${OUT}/a`, { cache: cached.includes("A") ? "hashed" : "none" }),
  B: await serveStatic(`${OUT}/b`, { cache: cached.includes("B") ? "hashed" : "none" }),
};
if (cached) console.log(`cacheable assets: ${cached}`);
const browser = await launchChromium();
const page = await browser.newPage();
const url = (base: string, c: { variant: string; live: number }) => {
  const q = new URLSearchParams({ mode: "harness", path: "/recovery.sqlite3", pool: `ab-${c.variant}-${c.live}` });
  if (c.variant === "stalled") q.set("noRestartLimit", "1");
  return `${base}?${q}`;
};
async function first(page: Page): Promise<RecoveryTimeline> {
  await waitInPage(page, () => window.bench?.firstStepSeen !== undefined || window.bench?.status === "failed", 120_000);
  const t = await page.evaluate(() => window.bench.timeline!());
  if (t.firstStep?.kind !== "bench.hot") throw new Error(`not hot ${JSON.stringify(t.firstStep)}`);
  return t;
}
for (const side of ["A", "B"] as const)
  for (const c of variants) {
    await page.goto(url(servers[side].url, c));
    await waitInPage(page, () => window.bench?.status === "ready" || window.bench?.status === "failed", 60_000);
    await page.evaluate(([o, k]) => window.bench.client!.call("seed", o, k), [c.live - 1, c.variant] as const);
    await waitInPage(page, () => window.bench.firstStepSeen !== undefined);
  }
const res: Record<string, number[]> = {};
const phases: Record<string, number[][]> = {};
for (let r = 0; r < rounds; r++) {
  for (const c of variants)
    for (const side of (r % 2 ? ["B", "A"] : ["A", "B"]) as ("A" | "B")[]) {
      await page.goto(url(servers[side].url, c));
      await first(page);
      for (let k = 0; k < 2; k++) {
        await page.waitForTimeout(200);
        await page.reload();
        const t = await first(page);
        const committed = t.firstStep!.committed;
        (res[`${c.variant}${c.live} ${side}`] ??= []).push(committed);
        (phases[`${c.variant}${c.live} ${side}`] ??= []).push(
          [t.opening, t.recovering, t.ready, committed].map((x) => Math.round(x ?? NaN)),
        );
      }
    }
  process.stderr.write(`round ${r + 1}\n`);
}
const med = (a: number[]) => {
  const s = [...a].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)]!;
};
for (const k of Object.keys(res).sort()) {
  const p = phases[k]!;
  const m = (i: number) => med(p.map((x) => x[i]!));
  console.log(
    k.padEnd(18),
    "median",
    Math.round(med(res[k]!)),
    "phases(open,recov,ready,first)",
    [0, 1, 2, 3].map(m).join(" "),
    "runs",
    res[k]!.map(Math.round).join(","),
  );
}
await browser.close();
await servers.A.close();
await servers.B.close();
process.exit(0);
