/**
 * `npm run start:edge`: the demo page against a local Durable Object. The harness runs in workerd (the demo's
 * extensions and offline model in worker/edge-object.ts, state persisted under .tmp/edge-demo), and the page
 * — built by `vite build`, served by `vite preview` — connects to it with `connectHarness(url)` (`?edge=`), or runs
 * the agent in the tab under the object's lease (`?follow=`: close the tab and the object carries on).
 * Ctrl-C stops both.
 */
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { Miniflare } from "miniflare";
import { bundleWorker, quietRuntime, sqliteObject, workerModules } from "../examples/local-edge.ts";

const root = new URL("..", import.meta.url).pathname;
const persist = `${root}.tmp/edge-demo`;
mkdirSync(persist, { recursive: true });
const mf = new Miniflare({
  modules: workerModules(await bundleWorker(new URL("../worker/edge-object.ts", import.meta.url))),
  compatibilityDate: "2026-04-01",
  handleRuntimeStdio: quietRuntime,
  durableObjectsPersist: persist,
  durableObjects: { DEMO: sqliteObject("DemoObject"), FOLLOW: sqliteObject("FollowDemoObject") },
  host: "127.0.0.1",
  port: 0,
});
const objectUrl = await mf.ready;
const origin = objectUrl.href.replace(/^http/, "ws").replace(/\/$/, "");
const socketUrl = `${origin}/demo`;
const followed = `${origin}/follow-demo`;

const preview = spawn("npx", ["vite", "preview", "--port", "4173", "--host", "127.0.0.1"], {
  cwd: root,
  stdio: ["ignore", "pipe", "inherit"],
});
preview.stdout.on("data", (chunk: Buffer) => {
  const text = chunk.toString();
  process.stdout.write(text);
  const page = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(text)?.[1];
  if (!page) return;
  console.log(`\nThe demo against a local Durable Object: ${page}?edge=${encodeURIComponent(socketUrl)}`);
  // The tab runs the agent under the object's lease; close it mid-task and open the second address: it has gone on.
  console.log(`The agent in this tab, followed by its object: ${page}?follow=${encodeURIComponent(`${followed}/follow`)}`);
  console.log(`That object, after the tab closed: ${page}?edge=${encodeURIComponent(followed)}\n`);
});
const stop = async () => {
  preview.kill();
  await mf.dispose();
  process.exit(0);
};
process.on("SIGINT", () => void stop());
process.on("SIGTERM", () => void stop());
preview.on("exit", () => void stop());
