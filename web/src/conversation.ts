import type { ConversationViewState, ModelRef } from "pi-durable-web";
import type { HarnessClient } from "pi-durable-web/client";
import { OFFLINE_MODEL } from "../../worker/protocol.ts";
import { app } from "./app.ts";

/**
 * The root conversation of the current worker and its committed view, shared by the chat, the models panel
 * and the file browser. A new worker (reload, restart) gets a new subscription; nothing is cached across.
 */
type ViewListener = (view: ConversationViewState, client: HarnessClient) => void;

const listeners = new Set<ViewListener>();
let current: { client: HarnessClient; id: number; view?: ConversationViewState; loadOlder?: () => Promise<boolean> } | undefined;

export function onConversation(listener: ViewListener): void {
  listeners.add(listener);
  if (current?.view) listener(current.view, current.client);
}

/** The current worker's root conversation, once known. */
export function conversation():
  | { client: HarnessClient; id: number; view?: ConversationViewState; loadOlder?: () => Promise<boolean> }
  | undefined {
  return current && app.isCurrent(current.client) ? current : undefined;
}

/** The current worker's root conversation once its first view arrived (waits across a worker restart). */
export function whenConversation(): Promise<{ client: HarnessClient; id: number; view: ConversationViewState }> {
  const now = conversation();
  if (now?.view) return Promise.resolve({ ...now, view: now.view });
  return new Promise((resolve) => {
    const listener: ViewListener = (view, client) => {
      const latest = conversation();
      if (!latest || latest.client !== client) return;
      listeners.delete(listener);
      resolve({ client, id: latest.id, view });
    };
    listeners.add(listener);
  });
}

/**
 * The worker's root conversation. A read-only copy that holds none yet (a new device's, before the object's snapshot
 * or log reached it) cannot create it and answers ReadOnlySession: ask again until the copy holds it, for as long as
 * this worker is the page's.
 */
export async function rootConversationOf(client: HarnessClient): Promise<number> {
  for (;;) {
    try {
      return await client.rootConversation();
    } catch (error) {
      if ((error as { name?: unknown } | undefined)?.name !== "ReadOnlySession" || !app.isCurrent(client)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

export function modelKey(model: ModelRef | undefined): string {
  return model ? `${model.provider}/${model.id}` : "";
}

export function isOfflineModel(model: ModelRef | undefined): boolean {
  return model?.provider === OFFLINE_MODEL.provider && model.id === OFFLINE_MODEL.id;
}

/** Makes sure the conversation talks to a model: the offline demo model unless the user picked another. */
export async function ensureModel(client: HarnessClient, id: number, view: ConversationViewState): Promise<void> {
  if (!view.agent.model) await client.configure(id, { model: { ...OFFLINE_MODEL } });
}

app.onReady((client) => {
  void (async () => {
    const id = await rootConversationOf(client);
    if (!app.isCurrent(client)) return;
    current = { client, id };
    let first = true;
    const opened = await client.openConversation(id);
    if (current?.client !== client) return;
    current.loadOlder = () => opened.loadOlder();
    opened.subscribe((view) => {
      if (!app.isCurrent(client) || current?.client !== client) return;
      current.view = view;
      if (first) {
        first = false;
        if (!app.paused) void ensureModel(client, id, view).catch((error) => app.showError(error, "choosing the offline model"));
      }
      for (const listener of listeners) listener(view, client);
    });
  })().catch((error) => {
    if (app.isCurrent(client)) app.showError(error, "opening the conversation");
  });
});
