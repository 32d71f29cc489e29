import { createHash } from "node:crypto";
import { cp, mkdir, readdir, readFile, rm } from "node:fs/promises";
import { join, relative, resolve } from "node:path";
import { build, type Plugin } from "vite";
import { describe, expect, it } from "vitest";
import { waitForReady } from "../src/testing/playwright.ts";
import { browserPerTest } from "./support/browser";
import { sendMessage, waitForReply, waitForStatus, waitForUserEntry } from "./support/demo";
import { DEMO_DIST } from "./support/global-setup";
import { serveStatic } from "./support/server";

// The demo's PWA (vite-plugin-pwa, workbox precaching; web/sw.ts) across a new build, in Chromium: after a
// build that changed one source file, the service worker fetches only the files whose content changed, and
// the page offers the update instead of swapping the app under a running tab. Offline loading itself is in
// demo.e2e.ts and first-minute.e2e.ts.

const session = browserPerTest();

const SERVED = resolve(".tmp/pwa-served");
const NEXT = resolve(".tmp/pwa-next");

/** Changes one source file of the build: web/src/log.ts gets one more statement. */
function changeOneFile(): Plugin {
  return {
    name: "e2e:change-one-file",
    enforce: "pre",
    transform(code, id) {
      if (!id.endsWith("/web/src/log.ts")) return undefined;
      return `${code}\ndocument.documentElement.dataset.build = "next";\n`;
    },
  };
}

async function digests(root: string, directory = root): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  for (const entry of await readdir(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) for (const [name, digest] of await digests(root, path)) found.set(name, digest);
    else
      found.set(
        relative(root, path).split("\\").join("/"),
        createHash("sha256")
          .update(await readFile(path))
          .digest("hex"),
      );
  }
  return found;
}

describe("the PWA across a new build", () => {
  it("re-downloads only the changed files, through the service worker, and asks before updating (screenshot)", {
    timeout: 240_000,
  }, async () => {
    await mkdir(".tmp/screenshots", { recursive: true });
    // The next build: the same sources with one file changed.
    // As `vite build` does it: vitest runs with NODE_ENV=test, which would change what the bundles define.
    const nodeEnv = process.env.NODE_ENV;
    process.env.NODE_ENV = "production";
    try {
      await build({
        configFile: resolve("vite.config.ts"),
        mode: "production",
        logLevel: "warn",
        build: { outDir: NEXT, emptyOutDir: true },
        plugins: [changeOneFile()],
      });
    } finally {
      process.env.NODE_ENV = nodeEnv;
    }
    const before = await digests(DEMO_DIST);
    const after = await digests(NEXT);
    const changed = [...after].filter(([name, digest]) => before.get(name) !== digest).map(([name]) => name);
    expect(changed.some((name) => /^assets\/index-.*\.js$/.test(name))).toBe(true); // the changed file's chunk
    expect(changed.filter((name) => name.endsWith(".wasm") || name.includes("harness-worker"))).toEqual([]);

    await rm(SERVED, { recursive: true, force: true });
    await cp(DEMO_DIST, SERVED, { recursive: true });
    const requests: string[] = [];
    const server = await serveStatic(SERVED, (pathname) => requests.push(pathname.slice(1)));
    try {
      const page = await session.newPage(server.url);
      await waitForReady(page);
      await waitForStatus(page, "ready");
      // The first worker is active once it has precached this build.
      await page.waitForFunction(() => navigator.serviceWorker.ready.then((registration) => registration.active?.state === "activated"));
      await sendMessage(page, "list files");
      const userEntry = await waitForUserEntry(page, "list files");
      await waitForReply(page, userEntry, "files");
      const firstVisit = new Set(requests);
      expect([...firstVisit].some((name) => name.endsWith(".wasm"))).toBe(true);

      // Deploy the next build; the page looks for it (as it does on every load).
      await rm(SERVED, { recursive: true, force: true });
      await cp(NEXT, SERVED, { recursive: true });
      requests.length = 0;
      await page.evaluate(() => pi.checkForUpdate());
      await page.locator("#update-banner").waitFor({ timeout: 60_000 });
      await page.screenshot({ path: ".tmp/screenshots/pwa-update-waiting.png" });
      const fetched = [...new Set(requests)].sort();
      // The worker script itself, and then exactly the files whose content changed.
      expect(fetched).toEqual([...new Set(["sw.js", ...changed])].sort());
      expect(await page.evaluate(() => document.documentElement.dataset.build)).toBeUndefined(); // still the old build

      // "Update now": the new worker takes over and the tab reloads into the new build, history intact.
      await Promise.all([page.waitForEvent("load"), page.click("#banner-update")]);
      await page.waitForSelector("body[data-ready]", { state: "attached" });
      await waitForStatus(page, "ready");
      expect(await page.evaluate(() => document.documentElement.dataset.build)).toBe("next");
      expect(await waitForUserEntry(page, "list files")).toBe(userEntry);
      expect(await page.isVisible("#update-banner")).toBe(false);
    } finally {
      await server.close();
      await rm(SERVED, { recursive: true, force: true });
      await rm(NEXT, { recursive: true, force: true });
    }
  });
});
