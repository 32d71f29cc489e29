import type { CrashPointHit } from "pi-durable-web/client";
import { app } from "./app.ts";

/**
 * The crash point the page armed, and where the worker stopped. The stop is what a test or a person turns
 * into a crash by reloading; the note about it survives the reload in sessionStorage, so the next load can
 * say what just happened and what to expect.
 */
export type CrashPointState = { kind: "armed"; name: string; expect?: string } | { kind: "stopped"; hit: CrashPointHit; expect?: string };

const AFTER_RELOAD = "pi-durable-web:after-reload";
const listeners = new Set<(state: CrashPointState | undefined) => void>();
let state: CrashPointState | undefined;

export function onCrashPoint(listener: (state: CrashPointState | undefined) => void): void {
  listeners.add(listener);
  listener(state);
}

function set(next: CrashPointState | undefined): void {
  state = next;
  if (next?.kind === "stopped") {
    sessionStorage.setItem(
      AFTER_RELOAD,
      JSON.stringify({ name: next.hit.name, taskId: next.hit.taskId, taskKind: next.hit.taskKind, expect: next.expect }),
    );
  } else {
    sessionStorage.removeItem(AFTER_RELOAD);
  }
  for (const listener of listeners) listener(next);
}

/** Stops the worker at `name` the next time it gets there; `expect` says what the reload will show. */
export function armCrashPoint(name: string, expect?: string): Promise<CrashPointHit> {
  const client = app.client;
  set({ kind: "armed", name, ...(expect ? { expect } : {}) });
  const hit = client.armCrashPoint(name);
  hit.then(
    (hit) => {
      if (app.isCurrent(client)) set({ kind: "stopped", hit, ...(expect ? { expect } : {}) });
    },
    () => {},
  );
  return hit;
}

export async function disarmCrashPoint(): Promise<void> {
  set(undefined);
  await app.client.disarmCrashPoint();
}

/**
 * A new worker forgets what the old one was armed with. The note about a stop stays for the new worker's
 * ready (a terminated worker is a crash, like a reload).
 */
app.onClient(() => {
  if (state) {
    state = undefined;
    for (const listener of listeners) listener(undefined);
  }
});

/** Where the previous worker (before a reload or a restart) was stopped, once. */
export function takeAfterReloadNote(): { name: string; taskId: number; taskKind: string; expect?: string } | undefined {
  const text = sessionStorage.getItem(AFTER_RELOAD);
  sessionStorage.removeItem(AFTER_RELOAD);
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
