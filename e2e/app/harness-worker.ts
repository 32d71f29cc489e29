/// <reference lib="webworker" />
// A worker of the e2e page that serves a harness the way an app does (e2e/host.e2e.ts): the counter task,
// its own OPFS pool, and the options the worker's name asks for.
import { counterTask } from "../../examples/counter-task.ts";
import type { WorkerCaller } from "../../src/browser/comlink.ts";
import type { SocketLike } from "../../src/browser/socket.ts";
import { serveHarness } from "../../src/browser/worker.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, defineTask, Harness, MemoryStorage } from "../../src/index.ts";
import type { E2eWorkerScope, FollowSocket, HookAnswer, ToldAuthorizeError, WorkerOptions } from "./host-api.ts";

const options = JSON.parse(self.name || "{}") as WorkerOptions;
/** With `tabHook`: how the authorize hook answers another tab's `onStatus` (e2e/tabs-refused.e2e.ts, decision 0132). */
let tabAnswer: HookAnswer = "allow";
/** With `pageHook`: how the authorize hook answers this worker's own page's `onStatus` (e2e/authorize-own-status.e2e.ts). */
let pageAnswer: HookAnswer = options.pageHook ?? "allow";
/** What `onAuthorizeError` was told, in order: the hook's own error and where it failed. */
const authorizeErrors: ToldAuthorizeError[] = [];
/** With `follow`: every socket the follow link opened, in order (a reconnect is a new one: e2e/follow-close.e2e.ts). */
const followSockets: FollowSocket[] = [];
// Read and set from the test through Playwright's worker handle (e2e/support/hooks.ts): a page call may wait while the
// page's status subscription is not served, these do not.
const scope = globalThis as unknown as E2eWorkerScope;
scope.e2eFollowSockets = followSockets;
scope.e2eAuthorizeErrors = authorizeErrors;
scope.e2ePageAsks = [];
scope.e2ePageAnswer = (answer) => {
  pageAnswer = answer;
};
/** Holds its invocation without committing: the live work a reload leaves `running` (e2e/host.e2e.ts, S4). */
const stall = defineTask<null, { phase: "stall" }, null>({
  name: "example.stall",
  version: 1,
  initial: () => ({ phase: "stall" }),
  phases: { stall: (_task, runtime) => new Promise<void>((resolve) => runtime.signal.addEventListener("abort", () => resolve())) },
  abort: async () => {},
});
const counter = counterTask(() => {});
const extension = defineExtension({ name: "example", tasks: [counter, stall] });

/** The hook's answer to `caller`'s status subscription, and to the methods `pageRefuses` names; the rest is let through. */
const statusAnswer = (caller: WorkerCaller, method: string): HookAnswer => {
  if (caller.from === "page" && options.pageRefuses?.includes(method)) return "refuse";
  if (method !== "onStatus") return "allow";
  if (caller.from === "tab") return options.tabHook ? tabAnswer : "allow";
  scope.e2ePageAsks.push(Date.now());
  return pageAnswer;
};

const served = serveHarness({
  extensions: [extension],
  poolDirectory: ".e2e-host-pool",
  crashPoints: options.crashPoints,
  ...(options.tabHook || options.pageHook || options.pageRefuses
    ? {
        authorize: (caller: WorkerCaller, call: { method: string }) => {
          const answer = statusAnswer(caller, call.method);
          if (answer === "throw") throw new Error("the e2e permission store is down");
          return answer === "allow";
        },
        onAuthorizeError: (error: unknown, at: { caller: WorkerCaller; action: string; door: string }) => {
          const { name, message } = error as Error;
          authorizeErrors.push({ name, message, from: at.caller.from, action: at.action, door: at.door });
        },
      }
    : {}),
  ...(options.follow
    ? {
        follow: {
          url: options.follow,
          connect: (url: string) => {
            const socket = new WebSocket(url);
            const seen: FollowSocket = { socket };
            socket.addEventListener("close", ({ code, wasClean }) => void (seen.closed = { code, wasClean }));
            followSockets.push(seen);
            return socket as SocketLike;
          },
        },
      }
    : {}),
  onReady: (harness) => {
    scope.e2eHarness = harness;
  },
  methods: {
    /** How the hook answers another tab's status subscription from now on (with `tabHook`). */
    tabAnswer: async (_harness, answer) => {
      tabAnswer = answer as HookAnswer;
    },
    /** What `onAuthorizeError` was told so far. */
    authorizeErrors: async () => authorizeErrors,
    /** Starts the seed's counter (S12): to `to`, a tick every `everyMs`. */
    count: async (harness, to, everyMs) => {
      const root = await harness.root(ctx);
      await root.commit((tx) => void tx.createTask(counter, { to: Number(to), everyMs: Number(everyMs) }), ctx);
    },
    /** Creates `count` stall tasks in one commit (they run at once: scheduling resumes on its own). */
    stall: async (harness, count) => {
      const root = await harness.root(ctx);
      await root.commit((tx) => {
        for (let index = 0; index < Number(count); index++) tx.createTask(stall, null);
      }, ctx);
    },
    /** Listeners the host holds for the page's subscriptions. */
    listeners: () => served.listenerCount(),
    /** `resume()` on a read-only harness: the library's ReadOnlySession, thrown inside the worker. */
    resumeReadOnly: async () => {
      const viewer = await Harness.open(new MemoryStorage(), { registry: createRegistry().install(extension), readOnly: true }, ctx);
      viewer.resume();
    },
  },
});
