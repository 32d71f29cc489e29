/**
 * Edge tests run the Worker in test/edge/worker.ts in workerd through miniflare's Node API (see
 * docs/decisions/0014-workerd-tests-on-node-20.md). Each object lives in a persist directory, so disposing
 * miniflare and starting it again is a cold restart of every object: the eviction without a request.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { bundleWorker, quietRuntime, sqliteObject, workerModules } from "../../examples/local-edge.ts";
import type { SocketLike } from "../../src/browser/socket.ts";

let bundle: Promise<string> | undefined;

/** The test Worker, bundled once per test file. */
export function workerBundle(): Promise<string> {
  bundle ??= bundleWorker(new URL("./worker.ts", import.meta.url));
  return bundle;
}

/** Lines the objects printed through the PRINT binding, in arrival order, per object name. */
export class Printed {
  readonly lines: string[] = [];
  #waiters: Array<() => void> = [];
  push(line: string): void {
    this.lines.push(line);
    for (const wake of this.#waiters.splice(0)) wake();
  }
  /** Resolves when `done(lines)` holds. */
  async until(done: (lines: readonly string[]) => boolean, what = "printed lines"): Promise<void> {
    for (let i = 0; i < 2000 && !done(this.lines); i++) {
      await Promise.race([new Promise<void>((resolve) => this.#waiters.push(resolve)), pause(25)]);
    }
    if (!done(this.lines)) throw new Error(`never printed ${what}; got ${JSON.stringify(this.lines)}`);
  }
}

export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export type ObjectKind =
  | "conformance"
  | "counter"
  | "sleeper"
  | "crasher"
  | "agent"
  | "demo"
  | "hibernating"
  | "shared"
  | "sweep"
  | "limited"
  | "users"
  | "signed"
  | "approval"
  | "follow"
  | "doorfail";

export interface Edge {
  /** A request to the object named `name` (routes of test/edge/worker.ts). */
  call(object: ObjectKind, name: string, path: string, init?: RequestInit): Promise<Response>;
  json<T = any>(object: ObjectKind, name: string, path: string, init?: RequestInit): Promise<T>;
  printed: Printed;
  /** What workerd wrote to its stderr (uncaught exceptions land there). */
  runtimeErrors: string[];
  /**
   * Cold restart: workerd stops (every object is gone from memory) and starts again on the same storage —
   * with other bindings if given (a deploy of a changed Worker).
   */
  restart(config?: { bindings?: Record<string, string> }): Promise<void>;
  dispose(): Promise<void>;
}

/** Starts workerd with the test Worker and a fresh persist directory. */
export async function startEdge(config: { bindings?: Record<string, string>; compatibilityFlags?: string[] } = {}): Promise<Edge> {
  const script = await workerBundle();
  const persist = mkdtempSync(join(tmpdir(), "pi-durable-edge-"));
  const printed = new Printed();
  const runtimeErrors: string[] = [];
  let bindings = config.bindings ?? {};
  const options = () =>
    new Miniflare({
      modules: workerModules(script),
      compatibilityDate: "2026-04-01",
      compatibilityFlags: config.compatibilityFlags ?? [],
      handleRuntimeStdio: (stdout: NodeJS.ReadableStream, stderr: NodeJS.ReadableStream) => {
        quietRuntime(stdout, stderr);
        stderr.on("data", (chunk: Buffer) => void runtimeErrors.push(chunk.toString()));
      },
      durableObjectsPersist: persist,
      bindings,
      serviceBindings: {
        PRINT: async (request: { text(): Promise<string> }) => {
          printed.push(await request.text());
          return new Response("ok");
        },
      },
      durableObjects: {
        CONFORMANCE: sqliteObject("ConformanceObject"),
        COUNTER: sqliteObject("CounterObject"),
        SLEEPER: sqliteObject("SleeperObject"),
        CRASHER: sqliteObject("CrasherObject"),
        AGENT: sqliteObject("AgentObject"),
        DEMO: sqliteObject("DemoObject"),
        HIBERNATING: sqliteObject("HibernatingObject"),
        SHARED: sqliteObject("SharedObject"),
        SWEEP: sqliteObject("SweepObject"),
        LIMITED: sqliteObject("LimitedObject"),
        USERS: sqliteObject("UserAgent"),
        APPROVAL: sqliteObject("ApprovalObject"),
        FOLLOW: sqliteObject("FollowObject"),
        DOORFAIL: sqliteObject("DoorFailObject"),
      },
    });
  let mf = options();
  await mf.ready;
  const edge: Edge = {
    printed,
    runtimeErrors,
    call: (object, name, path, init) =>
      mf.dispatchFetch(`http://edge/${object}/${encodeURIComponent(name)}${path}`, init as never) as unknown as Promise<Response>,
    async json(object, name, path, init) {
      const response = await edge.call(object, name, path, init);
      const text = await response.text();
      if (!response.ok) throw new Error(`${object}/${name}${path}: ${response.status} ${text}`);
      return JSON.parse(text);
    },
    async restart(next) {
      if (next?.bindings) bindings = next.bindings;
      await mf.dispose();
      mf = options();
      await mf.ready;
    },
    async dispose() {
      await mf.dispose();
      rmSync(persist, { recursive: true, force: true });
    },
  };
  return edge;
}

type Listener = (event?: { data: unknown }) => void;

/** A WebSocket to the object `name` through miniflare (Node 20 has no WebSocket of its own), shaped like the browser's. */
export function edgeSocket(edge: Edge, object: ObjectKind, name: string, headers: Record<string, string> = {}, path = "/"): SocketLike {
  const listeners: Record<string, Listener[]> = { open: [], message: [], close: [], error: [] };
  const fire = (type: string, event?: { data: unknown }) => {
    for (const listener of listeners[type]!) listener(event);
  };
  let socket: { send(data: string): void; close(code?: number, reason?: string): void } | undefined;
  void edge.call(object, name, path, { headers: { ...headers, Upgrade: "websocket" } }).then(
    (response) => {
      const ws = (response as unknown as { webSocket: any }).webSocket;
      if (!ws) return fire("error");
      ws.accept();
      ws.addEventListener("message", (event: { data: unknown }) => fire("message", event));
      ws.addEventListener("close", () => fire("close"));
      socket = ws;
      fire("open");
    },
    () => fire("error"),
  );
  return {
    send: (data) => socket!.send(data),
    close: (code, reason) => socket?.close(code, reason),
    addEventListener: (type: string, listener: Listener) => void listeners[type]!.push(listener),
  } as SocketLike;
}
