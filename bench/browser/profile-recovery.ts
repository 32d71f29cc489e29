/**
 * Where recovery time goes, in the real worker: `npx tsx bench/browser/profile-recovery.ts [stalled|sleeping] [live]`.
 *
 * Builds the bench page unminified (function names intact), seeds `live` tasks, then reloads a few times with
 * the V8 sampling profiler started in the new worker before its first line runs (CDP auto-attach, paused on
 * start). Prints self time per function from the worker's start to the first resumed step, averaged over the
 * profiled reloads, and the phase marks of each reload. With PROFILE_OUT=prefix, each profile is also written
 * to `prefix.N.cpuprofile` (open it in Chrome DevTools). With PROFILE_CACHE=hashed the hashed assets are served
 * cacheable, as a deployed Vite app's are (decision 0104). A diagnostic, not part of `npm run bench`.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { build } from "vite";
import { DIST, launchChromium, serveStatic, waitInPage } from "./support.ts";

const variant = process.argv[2] === "sleeping" ? "sleeping" : "stalled";
const live = Number(process.argv[3] ?? 10_000);
const RELOADS = 3;

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const outDir = join(DIST, "app-unminified");
await build({
  configFile: new URL("./vite.config.ts", import.meta.url).pathname,
  logLevel: "error",
  build: { outDir, emptyOutDir: true, minify: false },
});
const server = await serveStatic(outDir, { cache: process.env.PROFILE_CACHE === "hashed" ? "hashed" : "none" });
const browser = await launchChromium();
try {
  const page = await browser.newPage();
  const query = new URLSearchParams({ mode: "harness", path: "/recovery.sqlite3", pool: `pi-bench-profile-${variant}-${live}` });
  if (variant === "stalled") query.set("noRestartLimit", "1");
  await page.goto(`${server.url}?${query}`);
  await waitInPage(page, () => window.bench?.status === "ready");
  await page.evaluate(([others, kind]) => window.bench.client!.call("seed", others, kind), [live - 1, variant] as const);
  await waitInPage(page, () => window.bench.firstStepSeen !== undefined);

  const selfMs = new Map<string, number>();
  for (let reload = 0; reload <= RELOADS; reload++) {
    const profile = await profileNextWorker(page, async () => {
      await page.waitForTimeout(200);
      await page.reload();
      await waitInPage(page, () => window.bench?.firstStepSeen !== undefined, 120_000);
    });
    const timeline = await page.evaluate(() => window.bench.timeline!());
    console.log(
      `reload ${reload}${reload === 0 ? " (warm-up, not counted)" : ""}: worker script ${timeline.workerScript.toFixed(0)} ms, opening ${timeline.opening?.toFixed(0)}, ` +
        `recovering ${timeline.recovering?.toFixed(0)}, ready ${timeline.ready?.toFixed(0)}, first step ${timeline.firstStep?.committed.toFixed(0)} ` +
        `(${timeline.firstStep?.stallsBefore} stalled phases begun before it)`,
    );
    if (reload === 0) continue;
    if (process.env.PROFILE_OUT) writeFileSync(`${process.env.PROFILE_OUT}.${reload}.cpuprofile`, JSON.stringify(profile));
    const byId = new Map(profile.nodes.map((node) => [node.id, node]));
    profile.samples.forEach((id, index) => {
      const frame = byId.get(id)!.callFrame;
      const key = `${frame.functionName || "(anonymous)"}  ${frame.url.split("/").pop() ?? ""}:${frame.lineNumber + 1}`;
      selfMs.set(key, (selfMs.get(key) ?? 0) + (profile.timeDeltas[index] ?? 0) / 1000 / RELOADS);
    });
  }
  const total = [...selfMs.values()].reduce((sum, ms) => sum + ms, 0);
  console.log(`\nworker self time per reload, start → first resumed step (${variant}, ${live} live; sampled ${total.toFixed(0)} ms):`);
  for (const [name, ms] of [...selfMs].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(`${ms.toFixed(1).padStart(8)} ms  ${name}`);
} finally {
  await browser.close();
  await server.close();
}

/**
 * Runs `action` (which must create a new worker and wait for its first step) with the worker paused on
 * start, so the profiler is running before its first instruction; returns the profile up to the end of `action`.
 */
async function profileNextWorker(page: Page, action: () => Promise<void>): Promise<Profile> {
  const cdp = await page.context().newCDPSession(page);
  let nextId = 0;
  const replies = new Map<number, (message: { result?: unknown; error?: { message: string } }) => void>();
  cdp.on("Target.receivedMessageFromTarget", (event) => {
    const message = JSON.parse(event.message) as { id?: number; result?: unknown; error?: { message: string } };
    if (message.id !== undefined) replies.get(message.id)?.(message);
  });
  const send = <T>(sessionId: string, method: string, params: object = {}) =>
    new Promise<T>((resolve, reject) => {
      const id = ++nextId;
      replies.set(id, (message) =>
        message.error ? reject(new Error(`${method}: ${message.error.message}`)) : resolve(message.result as T),
      );
      void cdp.send("Target.sendMessageToTarget", { sessionId, message: JSON.stringify({ id, method, params }) }).catch(reject);
    });
  let workerSession: Promise<string> | undefined;
  cdp.on("Target.attachedToTarget", (event) => {
    if (event.targetInfo.type !== "worker" || !event.waitingForDebugger) return;
    workerSession = (async () => {
      await send(event.sessionId, "Profiler.enable");
      await send(event.sessionId, "Profiler.setSamplingInterval", { interval: 100 });
      await send(event.sessionId, "Profiler.start");
      await send(event.sessionId, "Runtime.runIfWaitingForDebugger");
      return event.sessionId;
    })();
  });
  await cdp.send("Target.setAutoAttach", { autoAttach: true, waitForDebuggerOnStart: true, flatten: false });
  try {
    await action();
    if (!workerSession) throw new Error("the new worker was not attached paused");
    const { profile } = await send<{ profile: Profile }>(await workerSession, "Profiler.stop");
    return profile;
  } finally {
    await cdp.detach().catch(() => {});
  }
}
