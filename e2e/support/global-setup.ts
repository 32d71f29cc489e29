import { existsSync } from "node:fs";
import type { TestProject } from "vitest/node";
import { findChromium } from "../../scripts/find-chromium.mjs";
import { serveStatic } from "./server";

export const DIST = ".tmp/e2e-dist";

declare module "vitest" {
  export interface ProvidedContext {
    /** URL of the built e2e page (e2e/app), served once for all e2e files. */
    e2eBaseUrl: string;
  }
}

/** Checks the prerequisites with messages that say what to run, then serves the built page. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (!existsSync(`${DIST}/index.html`)) {
    throw new Error(`${DIST} is missing: run "npm run test:e2e" (it builds e2e/app first), or "npx vite build --config vite.e2e.config.ts".`);
  }
  if (!findChromium()) throw new Error('No Chromium found: run "node scripts/ensure-chromium.mjs" or set CHROMIUM_PATH.');
  const server = await serveStatic(DIST);
  project.provide("e2eBaseUrl", server.url);
  return () => server.close();
}
