/**
 * A local Durable Object next to the e2e page: the Worker of e2e/edge/worker.ts in workerd (miniflare, as
 * `npm run start:edge` and test/edge/support.ts run it), on a fresh persist directory per test and on a port
 * of its own that stays the same across restarts, so a page's socket comes back to it by itself.
 *
 *   const edge = edgePerTest();
 *   const page = await session.newPage(`${demoUrl}?edge=${encodeURIComponent(edge.socketUrl("chat"))}`);
 *   await edge.abort("chat");   // ctx.abort(): the object's crash
 *   await edge.restart();       // workerd stops and starts on the same storage: the eviction
 *
 * One workerd at a time (the machine has two cores, and a Chromium runs beside it).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { afterEach, beforeEach, onTestFailed } from "vitest";
import { bundleWorker, quietRuntime, sqliteObject, workerModules } from "../../examples/local-edge.ts";
import { Printed } from "../../test/edge/support.ts";

export interface LocalObject {
  /** The WebSocket URL of the object `name`, as a page passes it to `connectHarness(url)`. */
  socketUrl(name: string): string;
  /**
   * The URL of the follow link of object `name` (`serveHarness({ follow: { url } })`): a `follow-…` name leases for
   * 10 minutes, a `short-…` one for 3 s, a `pinned-…` one for good; a `trim-…` one leases for 10 minutes and a
   * `trimshort-…` one for 3 s, both keeping only the last 4 transactions of their log; a `doors-…` one is no follow
   * object: its authorize hook answers pages' status subscriptions as its `/hook` route says (e2e/edge/worker.ts).
   */
  followUrl(name: string): string;
  /** What the objects printed (the counter's `tick n`), in arrival order: side effects outside the objects. */
  readonly printed: Printed;
  /** How many object instances started (each object's first request, and again after an eviction or an abort). */
  readonly started: Printed;
  /**
   * Every start and print of an object instance, in arrival order, as `<instance>: started` or `<instance>: <line>`
   * (`instance` a random id per instance): which instance printed a tick, and whether it started after something.
   */
  readonly instances: Printed;
  /** `ctx.abort()` inside the object `name` (its committed writes stay; its sockets drop; its next event starts it anew). */
  abort(name: string): Promise<void>;
  /** Arms a stop point of the object `name` (e2e/edge/worker.ts: `drop-pushes`, `abort-at-release`, …). */
  arm(name: string, point: string): Promise<void>;
  /** Stops workerd and starts it again on the same storage and port: every object is evicted, its alarm survives. */
  restart(): Promise<void>;
  dispose(): Promise<void>;
}

let bundle: Promise<string> | undefined;

/** Starts workerd with the e2e Worker on a fresh persist directory and a free port. */
export async function startLocalObject(): Promise<LocalObject> {
  bundle ??= bundleWorker(new URL("../edge/worker.ts", import.meta.url));
  const script = await bundle;
  const persist = mkdtempSync(join(tmpdir(), "pi-durable-e2e-edge-"));
  const port = await freePort();
  const printed = new Printed();
  const started = new Printed();
  const instances = new Printed();
  const runtimeErrors: string[] = [];
  onTestFailed(() => {
    if (runtimeErrors.length) console.log(`workerd stderr:\n${runtimeErrors.join("")}`);
  });
  const start = async () => {
    const mf = new Miniflare({
      modules: workerModules(script),
      compatibilityDate: "2026-04-01",
      handleRuntimeStdio: (stdout: NodeJS.ReadableStream, stderr: NodeJS.ReadableStream) => {
        quietRuntime(stdout, stderr);
        stderr.on("data", (chunk: Buffer) => void runtimeErrors.push(chunk.toString()));
      },
      durableObjectsPersist: persist,
      durableObjects: {
        PLAIN: sqliteObject("PlainObject"),
        LONG: sqliteObject("LongLeaseObject"),
        SHORT: sqliteObject("ShortLeaseObject"),
        PINNED: sqliteObject("PinnedLeaseObject"),
        TRIM: sqliteObject("TrimObject"),
        TRIMSHORT: sqliteObject("TrimShortObject"),
        DOORS: sqliteObject("DoorsObject"),
      },
      serviceBindings: {
        PRINT: async (request: { text(): Promise<string>; headers: Headers }) => {
          const line = await request.text();
          printed.push(line);
          instances.push(`${request.headers.get("x-instance")}: ${line}`);
          return new Response("ok");
        },
        STARTED: async (request: { text(): Promise<string>; headers: Headers }) => {
          const line = await request.text();
          started.push(line);
          instances.push(`${request.headers.get("x-instance")}: ${line}`);
          return new Response("ok");
        },
      },
      host: "127.0.0.1",
      port,
    });
    await mf.ready;
    return mf;
  };
  let mf = await start();
  const origin = `127.0.0.1:${port}`;
  return {
    socketUrl: (name) => `ws://${origin}/${encodeURIComponent(name)}`,
    followUrl: (name) => `ws://${origin}/${encodeURIComponent(name)}/follow`,
    printed,
    started,
    instances,
    async abort(name) {
      // The object resets in the middle of this request: its answer is an error, which is the point.
      await fetch(`http://${origin}/${encodeURIComponent(name)}/abort`, { method: "POST" })
        .then((response) => response.body?.cancel())
        .catch(() => {});
    },
    async arm(name, point) {
      const response = await fetch(`http://${origin}/${encodeURIComponent(name)}/arm?point=${point}`, { method: "POST" });
      if (!response.ok) throw new Error(`arm ${point}: ${response.status} ${await response.text()}`);
    },
    async restart() {
      await mf.dispose();
      mf = await start();
    },
    async dispose() {
      await mf.dispose();
      rmSync(persist, { recursive: true, force: true });
    },
  };
}

/** A local object for every test of the file (started before each, disposed after), like browserPerTest(). */
export function edgePerTest(): LocalObject {
  let current: LocalObject | undefined;
  beforeEach(async () => {
    current = await startLocalObject();
  });
  afterEach(async () => {
    await current?.dispose();
    current = undefined;
  });
  const now = (): LocalObject => {
    if (!current) throw new Error("edgePerTest(): the object exists only while a test runs.");
    return current;
  };
  return {
    socketUrl: (name) => now().socketUrl(name),
    followUrl: (name) => now().followUrl(name),
    get printed() {
      return now().printed;
    },
    get started() {
      return now().started;
    },
    get instances() {
      return now().instances;
    },
    abort: (name) => now().abort(name),
    arm: (name, point) => now().arm(name, point),
    restart: () => now().restart(),
    dispose: () => now().dispose(),
  };
}

/** A port nobody listens on now (the object keeps it across restarts). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}
