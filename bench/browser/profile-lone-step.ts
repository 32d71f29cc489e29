/**
 * Where a lone step's worker time goes next to a raw commit's: `npx tsx bench/browser/profile-lone-step.ts [steps]`.
 *
 * Builds the bench page unminified, warms the kernel worker up, then runs `steps` raw commits and `steps` kernel
 * steps, each under the V8 sampling profiler in the worker (CDP, attached to the running worker), and prints self
 * time per function per commit for both. A diagnostic (decision 0061), not part of `npm run bench`.
 */
import { join } from "node:path";
import type { Page } from "playwright-core";
import { build } from "vite";
import { DIST, launchChromium, serveStatic, waitInPage } from "./support.ts";

const STEPS = Number(process.argv[2] ?? 20_000);

interface Profile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }>;
  samples: number[];
  timeDeltas: number[];
}

const outDir = join(DIST, "app-unminified");
await build({
  configFile: new URL("./vite.config.ts", import.meta.url).pathname,
  logLevel: "error",
  build: { outDir, emptyOutDir: true, minify: false },
});
const server = await serveStatic(outDir);
const browser = await launchChromium();
try {
  const page = await browser.newPage();
  await page.goto(`${server.url}?mode=kernel`);
  await waitInPage(page, () => window.bench?.kernel !== undefined);
  await page.evaluate((n) => window.bench.kernel!.rawCommits(n), 2000);
  await page.evaluate((n) => window.bench.kernel!.kernelSteps(n), 2000);
  const worker = await attachWorker(page);
  for (const [name, run] of [
    ["raw commit", (n: number) => window.bench.kernel!.rawCommits(n)],
    ["kernel step", (n: number) => window.bench.kernel!.kernelSteps(n)],
  ] as const) {
    await worker.send("Profiler.enable");
    await worker.send("Profiler.setSamplingInterval", { interval: 50 });
    await worker.send("Profiler.start");
    const { ms } = await page.evaluate(run, STEPS);
    const { profile } = await worker.send<{ profile: Profile }>("Profiler.stop");
    const self = new Map<string, number>();
    const byId = new Map(profile.nodes.map((node) => [node.id, node]));
    profile.samples.forEach((id, index) => {
      const frame = byId.get(id)!.callFrame;
      const key = `${frame.functionName || "(anonymous)"}  ${frame.url.split("/").pop() ?? ""}:${frame.lineNumber + 1}`;
      self.set(key, (self.get(key) ?? 0) + (profile.timeDeltas[index] ?? 0) / STEPS);
    });
    // Inclusive: each sample counts once for every distinct function on its stack.
    const parent = new Map<number, number>();
    for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
    const inclusive = new Map<string, number>();
    profile.samples.forEach((id, index) => {
      const seen = new Set<string>();
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const frame = byId.get(at)!.callFrame;
        seen.add(`${frame.functionName || "(anonymous)"}  ${frame.url.split("/").pop() ?? ""}:${frame.lineNumber + 1}`);
      }
      for (const key of seen) inclusive.set(key, (inclusive.get(key) ?? 0) + (profile.timeDeltas[index] ?? 0) / STEPS);
    });
    console.log(`\n${name}: inclusive time per commit (top 40):`);
    for (const [key, micros] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, 40))
      console.log(`${micros.toFixed(2).padStart(8)} µs  ${key}`);
    const total = [...self.values()].reduce((sum, micros) => sum + micros, 0);
    console.log(`\n${name}: ${((ms * 1000) / STEPS).toFixed(1)} µs each (profiled), ${total.toFixed(1)} µs sampled; self time per commit:`);
    for (const [key, micros] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 30))
      console.log(`${micros.toFixed(2).padStart(8)} µs  ${key}`);
  }
} finally {
  await browser.close();
  await server.close();
}

/** The page's running dedicated worker over CDP (non-flattened: Playwright does not route flattened child sessions). */
async function attachWorker(page: Page) {
  const cdp = await page.context().newCDPSession(page);
  let nextId = 0;
  const replies = new Map<number, (message: { result?: unknown; error?: { message: string } }) => void>();
  cdp.on("Target.receivedMessageFromTarget", (event) => {
    const message = JSON.parse(event.message) as { id?: number; result?: unknown; error?: { message: string } };
    if (message.id !== undefined) replies.get(message.id)?.(message);
  });
  const attached = new Promise<string>((resolve) =>
    cdp.on("Target.attachedToTarget", (event) => {
      if (event.targetInfo.type === "worker") resolve(event.sessionId);
    }),
  );
  await cdp.send("Target.setAutoAttach", { autoAttach: true, waitForDebuggerOnStart: false, flatten: false });
  const sessionId = await attached;
  return {
    send: <T>(method: string, params: object = {}) =>
      new Promise<T>((resolve, reject) => {
        const id = ++nextId;
        replies.set(id, (message) =>
          message.error ? reject(new Error(`${method}: ${message.error.message}`)) : resolve(message.result as T),
        );
        void cdp.send("Target.sendMessageToTarget", { sessionId, message: JSON.stringify({ id, method, params }) }).catch(reject);
      }),
  };
}
