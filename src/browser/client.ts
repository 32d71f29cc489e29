/**
 * The page side (`pi-durable-web/client`): talks to the worker that owns the database.
 *
 *   const worker = new Worker(new URL("./worker.ts", import.meta.url), { type: "module" });
 *   const client = connectHarness(worker);
 *   client.onStatus((status) => render(status));
 *   await client.ready();
 *   const id = await client.createTask("example.counter", { to: 5 });
 *
 * A plain comlink call to a dead worker never settles; every call made through the client rejects with
 * `WorkerGone` when the worker dies (terminated, crashed) or the client is disposed.
 */
import * as Comlink from "comlink";
import { DurableError, WorkerGone } from "../errors.ts";
import type { AgentChange, AgentConfig, SubmissionDraft, SubmissionOutcome } from "../agent/types.ts";
import type { ConversationViewState } from "../agent/view.ts";
import type { Inspection } from "../harness.ts";
import type { Json } from "../json.ts";
import type { Report } from "../reports.ts";
import type { Row } from "../storage/storage.ts";
import type { TaskRecord } from "../storage/records.ts";
import type { CrashPointHit, HarnessHost, HarnessStatus } from "./protocol.ts";

export type { CrashPointHit, HarnessStatus } from "./protocol.ts";

export class HarnessClient {
  readonly worker: Worker;
  readonly #remote: Comlink.Remote<HarnessHost>;
  #status: HarnessStatus = { kind: "starting" };
  readonly #statusListeners = new Set<(status: HarnessStatus) => void>();
  readonly #pending = new Set<(error: unknown) => void>();
  #gone: WorkerGone | undefined;

  constructor(worker: Worker) {
    this.worker = worker;
    this.#remote = Comlink.wrap<HarnessHost>(worker);
    // Death is told by the worker's life lock: the page is granted it when the worker is gone. An `error`
    // event only means death before the worker answered at all (its script failed to load or to start);
    // later it is an uncaught exception inside a worker that lives on.
    let started = false;
    worker.addEventListener("error", (event) => {
      if (!started) this.#die(`The database worker failed to start: ${event.message || "its script did not load"}.`);
    });
    void this.#remote.lifeLock().then(
      (name) => {
        started = true;
        const locks = (globalThis.navigator as Navigator | undefined)?.locks;
        if (name && locks) void locks.request(name, () => this.#die("The database worker stopped (terminated or crashed)."));
      },
      () => {},
    );
    void this.#track(
      this.#remote.onStatus(
        Comlink.proxy((status: HarnessStatus) => {
          this.#status = status;
          for (const listener of this.#statusListeners) listener(status);
        }),
      ),
    ).catch(() => {});
  }

  /** The latest status the worker reported. */
  get status(): HarnessStatus {
    return this.#status;
  }

  onStatus(listener: (status: HarnessStatus) => void): () => void {
    this.#statusListeners.add(listener);
    listener(this.#status);
    return () => this.#statusListeners.delete(listener);
  }

  /** Resolves once the database is open; rejects if opening failed, the worker died, or it was closed. */
  ready(): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (status: HarnessStatus) => {
        if (status.kind === "ready") resolve();
        else if (status.kind === "failed") reject(Object.assign(new DurableError(status.error.message), { name: status.error.name }));
        else if (status.kind === "closed") reject(new DurableError(`The database was closed (${status.reason}).`));
        else return;
        unsubscribe();
      };
      const unsubscribe = this.onStatus(check);
      this.#pending.add(reject);
      if (this.#gone) reject(this.#gone);
    });
  }

  onReport(listener: (report: Report) => void): Promise<void> {
    return this.#track(this.#remote.onReport(Comlink.proxy(listener)));
  }

  /** The live task graph, pushed after commits. */
  watchTasks(listener: (inspection: Inspection) => void): Promise<void> {
    return this.#track(this.#remote.watchTasks(Comlink.proxy(listener)));
  }

  createTask(kind: string, input: Json, options?: { conversationId?: number }): Promise<number> {
    return this.#track(this.#remote.createTask(kind, input, options));
  }

  getTask(id: number): Promise<TaskRecord | undefined> {
    return this.#track(this.#remote.getTask(id));
  }

  waitForTask(id: number): Promise<TaskRecord> {
    return this.#track(this.#remote.waitForTask(id));
  }

  abortTask(id: number): Promise<"marked" | "terminal"> {
    return this.#track(this.#remote.abortTask(id));
  }

  inspect(): Promise<Inspection> {
    return this.#track(this.#remote.inspect());
  }

  /** Starts scheduling, for a worker served with `autoResume: false` (look first, then carry on). */
  resume(): Promise<void> {
    return this.#track(this.#remote.resume());
  }

  query(sql: string, ...params: Json[]): Promise<Row[]> {
    return this.#track(this.#remote.query(sql, params));
  }

  exportDatabase(): Promise<Uint8Array> {
    return this.#track(this.#remote.exportDatabase());
  }

  /** Resolves when the worker reaches crash point `name` (it then stays stopped there until the page reloads). */
  armCrashPoint(name: string): Promise<CrashPointHit> {
    return this.#track(
      new Promise<CrashPointHit>((resolve, reject) => {
        this.#remote.armCrashPoint(name, Comlink.proxy(resolve)).catch(reject);
      }),
    );
  }

  disarmCrashPoint(): Promise<void> {
    return this.#track(this.#remote.disarmCrashPoint());
  }

  /** Closes the database cleanly (no restart is counted at the next open). */
  close(): Promise<void> {
    return this.#track(this.#remote.close());
  }

  /** Asks the tab that owns the database to close it, so this one opens it. */
  requestTakeover(): Promise<void> {
    return this.#track(this.#remote.requestTakeover());
  }

  /** The root conversation's id (created on first use); `agent` (model, instructions, tools) is applied if it differs. */
  rootConversation(agent?: AgentChange): Promise<number> {
    return this.#track(this.#remote.rootConversation(agent));
  }

  createConversation(agent?: AgentChange): Promise<number> {
    return this.#track(this.#remote.createConversation(agent));
  }

  listConversations(): Promise<Array<{ id: number; agent: AgentConfig; busy: boolean }>> {
    return this.#track(this.#remote.listConversations());
  }

  configure(conversationId: number, change: AgentChange): Promise<AgentConfig> {
    return this.#track(this.#remote.configure(conversationId, change));
  }

  /** Submits an input or a write; resolves with the submission id once it is durable. */
  submit(conversationId: number, draft: SubmissionDraft): Promise<number> {
    return this.#track(this.#remote.submit(conversationId, draft));
  }

  /** Resolves when the submission is answered (`done`) or ends `unanswered`. */
  waitForSubmission(submissionId: number): Promise<SubmissionOutcome> {
    return this.#track(this.#remote.waitForSubmission(submissionId) as Promise<SubmissionOutcome>);
  }

  abortConversation(conversationId: number): Promise<void> {
    return this.#track(this.#remote.abortConversation(conversationId));
  }

  compact(conversationId: number, instructions?: string): Promise<number> {
    return this.#track(this.#remote.compact(conversationId, instructions));
  }

  /** The committed conversation view (entries, live run, tool slots, inbox, usage), now and after each commit. */
  watchConversation(conversationId: number, listener: (view: ConversationViewState) => void): Promise<void> {
    return this.#track(this.#remote.watchConversation(conversationId, Comlink.proxy(listener)));
  }

  /** Calls a method the app's worker added with `serveHarness({ methods })`. */
  call<T = unknown>(method: string, ...args: Json[]): Promise<T> {
    return this.#track(this.#remote.call(method, args) as Promise<T>);
  }

  /** Kills the worker at once (a crash, as far as the database is concerned). Pending calls reject. */
  terminate(): void {
    this.worker.terminate();
    this.#die("The database worker was terminated.");
  }

  #die(message: string): void {
    if (this.#gone) return;
    this.#gone = new WorkerGone(message);
    for (const reject of this.#pending) reject(this.#gone);
    this.#pending.clear();
    // The page hears of it like any other status change (a worker closed cleanly stays "closed").
    if (this.#status.kind !== "closed") {
      this.#status = { kind: "failed", error: { name: this.#gone.name, message } };
      for (const listener of this.#statusListeners) listener(this.#status);
    }
  }

  #track<T>(promise: Promise<T>): Promise<T> {
    if (this.#gone) return Promise.reject(this.#gone);
    return new Promise<T>((resolve, reject) => {
      this.#pending.add(reject);
      promise.then(
        (value) => {
          this.#pending.delete(reject);
          resolve(value);
        },
        (error) => {
          this.#pending.delete(reject);
          reject(error);
        },
      );
    });
  }
}

export function connectHarness(worker: Worker): HarnessClient {
  return new HarnessClient(worker);
}
