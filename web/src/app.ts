import type { Settings } from "pi-durable-web";
import { connectHarness, type HarnessClient, type HarnessStatus } from "pi-durable-web/client";
import type { DemoWorkerConfig } from "../../worker/protocol.ts";
import { errorText } from "./dom.ts";

/**
 * The page's side of the demo: one worker (the database owner) at a time, and the panels that follow it.
 * A panel registers `onClient` to subscribe to each new worker; callbacks from a replaced worker are
 * ignored with `isCurrent`.
 */

const SETTINGS_KEY = "pi-durable-web:settings";
const REPLAY_KEY = "pi-durable-web:probe-replay";

export type ProbeReplay = "safe" | "unsafe";

export function savedSettings(): Settings {
  try {
    return JSON.parse(localStorage.getItem(SETTINGS_KEY) ?? "{}", (_key, value) => (value === "Infinity" ? Infinity : value)) as Settings;
  } catch {
    return {};
  }
}

export function savedProbeReplay(): ProbeReplay {
  return localStorage.getItem(REPLAY_KEY) === "safe" ? "safe" : "unsafe";
}

export function saveWorkerConfig(settings: Settings, probeReplay: ProbeReplay): void {
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings, keepInfinity));
  localStorage.setItem(REPLAY_KEY, probeReplay);
}

type ClientListener = (client: HarnessClient) => void;
type ErrorListener = (error: { name: string; message: string; context?: string }) => void;

class DemoApp {
  /**
   * `?paused`: open without starting work, to look at what a crash left first (each new worker too, until
   * Resume: it drops `?paused` from the address, so the next reload carries on by itself).
   */
  paused = new URLSearchParams(location.search).has("paused");
  /** This tab's id: the worker marks its printed lines with it. */
  readonly tab = crypto.randomUUID();
  #client: HarnessClient | undefined;
  readonly #clientListeners = new Set<ClientListener>();
  readonly #readyListeners = new Set<ClientListener>();
  readonly #errorListeners = new Set<ErrorListener>();
  readonly #statusListeners = new Set<(status: HarnessStatus) => void>();
  /** The worker config of the current worker (what it was started with). */
  config: DemoWorkerConfig = {};
  /**
   * Steps a new worker needs before it starts work (sending provider keys: a run that resumed first would
   * find its model missing). When one is needed the worker opens paused and resumes after them.
   */
  readonly #beforeResume = new Set<{ needed(): boolean; run(client: HarnessClient): Promise<void> }>();

  get client(): HarnessClient {
    if (!this.#client) throw new Error("The worker has not been started.");
    return this.#client;
  }

  get status(): HarnessStatus {
    return this.#client?.status ?? { kind: "starting" };
  }

  isCurrent(client: HarnessClient): boolean {
    return client === this.#client;
  }

  /** Calls `listener` with every new worker's client (and the current one, if any). */
  onClient(listener: ClientListener): void {
    this.#clientListeners.add(listener);
    if (this.#client) listener(this.#client);
  }

  /** Calls `listener` each time a worker's database is open (ready). */
  onReady(listener: ClientListener): () => void {
    this.#readyListeners.add(listener);
    if (this.#client?.status.kind === "ready") listener(this.#client);
    return () => this.#readyListeners.delete(listener);
  }

  onStatus(listener: (status: HarnessStatus) => void): void {
    this.#statusListeners.add(listener);
    listener(this.status);
  }

  /** Whether the worker schedules work ("running") or waits for resume ("paused"), as last seen. */
  scheduling: string | undefined;
  readonly #schedulingListeners = new Set<(scheduling: string | undefined) => void>();

  onScheduling(listener: (scheduling: string | undefined) => void): void {
    this.#schedulingListeners.add(listener);
    listener(this.scheduling);
  }

  setScheduling(client: HarnessClient, scheduling: string | undefined): void {
    if (!this.isCurrent(client) || scheduling === this.scheduling) return;
    this.scheduling = scheduling;
    for (const listener of this.#schedulingListeners) listener(scheduling);
  }

  /** Starts scheduling (a page opened `?paused`, or a harness test's page). */
  async resume(): Promise<void> {
    const client = this.client;
    await client.resume();
    if (this.paused) {
      this.paused = false;
      const url = new URL(location.href);
      url.searchParams.delete("paused");
      history.replaceState(history.state, "", url);
    }
    this.setScheduling(client, "running");
  }

  beforeResume(step: { needed(): boolean; run(client: HarnessClient): Promise<void> }): void {
    this.#beforeResume.add(step);
  }

  onError(listener: ErrorListener): void {
    this.#errorListeners.add(listener);
  }

  showError(error: unknown, context?: string): void {
    const shown = { ...errorText(error), ...(context ? { context } : {}) };
    for (const listener of this.#errorListeners) listener(shown);
  }

  /** Runs a click's work; a failure goes to the log (and a toast), never to an unhandled rejection. */
  attempt(work: () => Promise<unknown> | unknown, context?: string): () => void {
    return () => {
      Promise.resolve()
        .then(work)
        .catch((error) => this.showError(error, context));
    };
  }

  start(): void {
    const hold = [...this.#beforeResume].some((step) => step.needed());
    // `?follow=ws://…/follow` (npm run start:edge): this tab's worker runs under the Durable Object's lease.
    const follow = new URLSearchParams(location.search).get("follow");
    this.config = {
      settings: savedSettings(),
      paused: this.paused || hold,
      tab: this.tab,
      probeReplay: savedProbeReplay(),
      ...(follow ? { follow } : {}),
    };
    // `?edge=ws://…` (npm run start:edge): the harness runs in a Durable Object instead of this tab's worker.
    const edge = new URLSearchParams(location.search).get("edge");
    const next = edge
      ? connectHarness(edge)
      : connectHarness(
          new Worker(new URL("../../worker/harness-worker.ts", import.meta.url), {
            type: "module",
            name: JSON.stringify(this.config, keepInfinity),
          }),
        );
    this.#client = next; // before subscribing: the page shows the new worker's status ("starting") at once
    this.setScheduling(next, undefined);
    let wasReady = false;
    next.onStatus((status) => {
      if (!this.isCurrent(next)) return; // a worker this page replaced
      for (const listener of this.#statusListeners) listener(status);
      if (status.kind === "ready" && !wasReady) {
        wasReady = true;
        void this.#prepare(next, hold);
      }
    });
    for (const listener of this.#clientListeners) listener(next);
  }

  async #prepare(client: HarnessClient, held: boolean): Promise<void> {
    for (const step of this.#beforeResume) await step.run(client).catch((error) => this.showError(error));
    if (held && !this.paused && this.isCurrent(client)) await this.resume().catch((error) => this.showError(error, "resume"));
    if (!this.isCurrent(client)) return;
    for (const listener of this.#readyListeners) listener(client);
  }

  /** Kills the worker at once (a crash, as far as the database is concerned) and starts a new one that recovers. */
  restartWorker(): void {
    this.#client?.terminate();
    this.start();
  }

  /** Closes the database cleanly (no restart counted), then starts a new worker with the saved config. */
  async restartWorkerCleanly(): Promise<void> {
    const old = this.#client;
    if (old) {
      await old.close().catch(() => {}); // a dead or never-opened worker has nothing to close
      old.terminate();
    }
    this.start();
  }
}

export const app = new DemoApp();

/** Resolves once the current (or next) worker is ready. */
export function whenReady(): Promise<HarnessClient> {
  return new Promise((resolve) => {
    let done = false;
    const stop = app.onReady((client) => {
      if (done || !app.isCurrent(client)) return;
      done = true;
      queueMicrotask(() => stop());
      resolve(client);
    });
  });
}

/** JSON has no Infinity (it would become null, and null means "default"): spell it out; the worker reads it back. */
function keepInfinity(_key: string, value: unknown): unknown {
  return value === Infinity ? "Infinity" : value;
}
