import { existsSync } from "node:fs";
import type { TestProject } from "vitest/node";
import { findChromium } from "../../scripts/find-chromium.mjs";
import { serveStatic } from "./server";

/** The e2e test page (e2e/app), built by vite.e2e.config.ts. */
export const DIST = ".tmp/e2e-dist";
/** The demo app (web/ + worker/), built by the root vite.config.ts: the production build users run. */
export const DEMO_DIST = "dist";

declare module "vitest" {
  export interface ProvidedContext {
    /** URL of the built e2e page (e2e/app), served once for all e2e files. */
    e2eBaseUrl: string;
    /** URL of the built demo app, on the same origin (same OPFS) as the e2e page. */
    demoBaseUrl: string;
  }
}

/** Checks the prerequisites with messages that say what to run, then serves both builds on one origin. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (!existsSync(`${DIST}/index.html`)) {
    throw new Error(
      `${DIST} is missing: run "npm run test:e2e" (it builds e2e/app first), or "npx vite build --config vite.e2e.config.ts".`,
    );
  }
  if (!existsSync(`${DEMO_DIST}/index.html`)) {
    throw new Error(`${DEMO_DIST} is missing: run "npm run test:e2e" (it builds the demo app first), or "npx vite build".`);
  }
  if (!findChromium()) throw new Error('No Chromium found: run "node scripts/ensure-chromium.mjs" or set CHROMIUM_PATH.');
  // One origin for both: the harness tests damage the demo's database through the e2e page's raw pool access.
  const server = await serveStatic({ "/": DEMO_DIST, "/e2e/": DIST });
  project.provide("e2eBaseUrl", `${server.url}e2e/`);
  project.provide("demoBaseUrl", server.url);
  return () => server.close();
}
