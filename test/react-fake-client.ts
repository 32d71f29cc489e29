import type { HarnessStatus } from "../src/browser/client.ts";
import { ConversationView, type ConversationViewUpdate, type Inspection, type Report, type SubmissionDraft } from "../src/index.ts";
import type { ReactHarnessClient, Unsubscribe } from "../src/react/index.ts";

/**
 * A client with no host behind it: the test pushes statuses, reports, task graphs and view updates, and counts
 * the listeners each subscription holds. `hold()` keeps subscriptions unresolved until `release()`, like a
 * host that has not answered yet.
 */
export class FakeClient implements ReactHarnessClient {
  status: HarnessStatus = { kind: "starting" };
  readonly statusListeners = new Set<(status: HarnessStatus) => void>();
  readonly reportListeners = new Set<(report: Report) => void>();
  readonly taskListeners = new Set<(inspection: Inspection) => void>();
  readonly viewListeners = new Map<number, Set<(update: ConversationViewUpdate) => void>>();
  readonly calls = { submit: [] as Array<[number, SubmissionDraft]>, requestTakeover: 0, close: 0 };
  #held: Array<() => void> | undefined;

  listenerCount(): number {
    return (
      this.statusListeners.size +
      this.reportListeners.size +
      this.taskListeners.size +
      [...this.viewListeners.values()].reduce((sum, set) => sum + set.size, 0)
    );
  }

  hold(): void {
    this.#held = [];
  }

  release(): void {
    const held = this.#held ?? [];
    this.#held = undefined;
    for (const resume of held) resume();
  }

  setStatus(status: HarnessStatus): void {
    this.status = status;
    for (const listener of this.statusListeners) listener(status);
  }

  report(report: Report): void {
    for (const listener of this.reportListeners) listener(report);
  }

  tasks(inspection: Inspection): void {
    for (const listener of this.taskListeners) listener(inspection);
  }

  view(conversationId: number, update: ConversationViewUpdate): void {
    for (const listener of this.viewListeners.get(conversationId) ?? []) listener(update);
  }

  onStatus(listener: (status: HarnessStatus) => void): Unsubscribe {
    this.statusListeners.add(listener);
    listener(this.status);
    return () => void this.statusListeners.delete(listener);
  }

  onReport(listener: (report: Report) => void): Promise<Unsubscribe> {
    return this.#subscribe(this.reportListeners, listener);
  }

  watchTasks(listener: (inspection: Inspection) => void): Promise<Unsubscribe> {
    return this.#subscribe(this.taskListeners, listener);
  }

  openConversation(conversationId: number): Promise<ConversationView> {
    const listeners = this.viewListeners.get(conversationId) ?? new Set();
    this.viewListeners.set(conversationId, listeners);
    return ConversationView.open({
      watch: (listener) => this.#subscribe(listeners, listener),
      entriesBefore: async () => ({ entries: [], hasOlder: false }),
    });
  }

  async submit(conversationId: number, draft: SubmissionDraft): Promise<number> {
    this.calls.submit.push([conversationId, draft]);
    return this.calls.submit.length;
  }

  async decide(): Promise<never> {
    throw new Error("FakeClient decides nothing: use an in-process harness for approvals.");
  }

  readonly pageId = "fake-page";

  async watchPageCalls(): Promise<() => void> {
    return () => {};
  }

  async providePageTools(): Promise<never> {
    throw new Error("FakeClient provides no page tools: use an in-process harness for page tools.");
  }

  async claimPageCall(): Promise<never> {
    throw new Error("FakeClient claims nothing: use an in-process harness for page tools.");
  }

  async answerPageCall(): Promise<never> {
    throw new Error("FakeClient answers nothing: use an in-process harness for page tools.");
  }

  waitForSubmission(): Promise<never> {
    return new Promise(() => {});
  }

  async requestTakeover(): Promise<void> {
    this.calls.requestTakeover++;
  }

  async close(): Promise<void> {
    this.calls.close++;
  }

  terminate(): void {}

  #subscribe<T>(set: Set<T>, listener: T): Promise<Unsubscribe> {
    return new Promise((resolve) => {
      const add = () => {
        set.add(listener);
        resolve(() => void set.delete(listener));
      };
      if (this.#held) this.#held.push(add);
      else add();
    });
  }
}

/** A view snapshot of an empty conversation. */
export function snapshot(conversationId: number, entries: Array<{ id: number; text: string }> = []): ConversationViewUpdate {
  return {
    type: "snapshot",
    conversationId,
    hasOlder: false,
    entries: entries.map(({ id, text }) => ({ id, conversationId, kind: "app.note", payload: { text }, at: id })),
    live: {},
    inbox: { items: [] },
    usage: { models: {} },
    agent: {},
    busy: false,
  };
}
