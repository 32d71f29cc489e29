/**
 * The streaming bench's page (`?mode=stream&pool=…` or `?mode=direct`). Every time is on the absolute clock
 * (`timeOrigin + now()`), comparable with the worker's chunk stamps; `openedMs` is on this document's clock.
 *
 * stream: a `serveHarness` worker (stream-worker.ts); the page renders the answer from the client's view
 *         store the way an app does — the streamed text when it is ahead, else the committed one.
 * direct: the non-durable baseline — the same faux stream from pi-ai, rendered in this page as it arrives.
 */
import { type AssistantMessage, createModels, fauxAssistantMessage, fauxProvider } from "@earendil-works/pi-ai";
import { ConversationViewStore, connectHarness } from "../../../src/browser/client.ts";
import type { ConversationViewState, EntryRecord } from "../../../src/index.ts";
import { STREAM_MODEL, STREAM_TEXT, STREAM_TOKEN_SIZE, STREAM_TOKENS_PER_SECOND } from "./stream-text.ts";

const now = () => performance.timeOrigin + performance.now();

export interface StreamRun {
  /** Chunk left the model stream → its text in the DOM (ms), one per chunk. */
  latencies: number[];
  /** DOM updates of the answer text while it streamed. */
  updates: number;
  /** First chunk → last chunk (ms). */
  streamMs: number;
}

export interface UpdateCost {
  type: string;
  bytes: number;
  /** The page's time to apply the update and render it (ms). */
  pageMs: number;
}

export interface StreamBench {
  seed(count: number): Promise<number>;
  run(): Promise<StreamRun>;
  /** Updates the page received since the last `run` began. */
  costs(): UpdateCost[];
  /** A write submitted → its entry rendered (ms). */
  writeToScreen(): Promise<number>;
  /** Navigation start → the last page of entries rendered (this document's clock). */
  openedMs?: number;
  entriesShown(): number;
}

declare global {
  interface Window {
    streamBench?: StreamBench;
  }
}

const textOf = (message: AssistantMessage | undefined) =>
  (message?.content ?? []).reduce((text, part) => text + (part.type === "text" ? part.text : ""), "");

function latenciesOf(chunks: Array<{ at: number; length: number }>, shown: Array<{ at: number; length: number }>): number[] {
  return chunks.flatMap((chunk) => {
    const seen = shown.find((mark) => mark.length >= chunk.length && mark.at >= chunk.at - 1);
    return seen ? [seen.at - chunk.at] : [];
  });
}

// As a chat lays it out: the transcript, then the answer streaming in below it.
const list = document.body.appendChild(document.createElement("ol"));
const answer = document.body.appendChild(document.createElement("p"));
const params = new URLSearchParams(location.search);

if (params.get("mode") === "direct") {
  const faux = fauxProvider({
    api: "bench-faux",
    provider: STREAM_MODEL.provider,
    models: [{ id: STREAM_MODEL.id }],
    tokensPerSecond: STREAM_TOKENS_PER_SECOND,
    tokenSize: STREAM_TOKEN_SIZE,
  });
  const models = createModels();
  models.setProvider(faux.provider);
  window.streamBench = {
    seed: async () => 0,
    costs: () => [],
    writeToScreen: async () => 0,
    entriesShown: () => 0,
    async run() {
      faux.setResponses([fauxAssistantMessage(STREAM_TEXT)]);
      const latencies: number[] = [];
      let updates = 0;
      let first = 0;
      let last = 0;
      const stream = models.streamSimple(faux.getModel(), { messages: [{ role: "user", content: "go", timestamp: Date.now() }] });
      for await (const event of stream) {
        if (event.type !== "text_delta") continue;
        const at = now();
        first ||= at;
        last = at;
        answer.textContent = textOf(event.partial);
        updates += 1;
        latencies.push(now() - at);
      }
      return { latencies, updates, streamMs: last - first };
    },
  };
  document.body.dataset.ready = "true";
} else {
  const config = { path: params.get("path") ?? "/stream.sqlite3", pool: params.get("pool") ?? "pi-bench-stream" };
  const worker = new Worker(new URL("./stream-worker.ts", import.meta.url), { type: "module", name: JSON.stringify(config) });
  const client = connectHarness(worker);
  const store = new ConversationViewStore();
  const rendered = new Set<number>();
  let shown: Array<{ at: number; length: number }> = [];
  let costs: UpdateCost[] = [];
  let shownText = "";
  let runStartedAfter = Infinity;
  let entryListeners: Array<(entry: EntryRecord) => void> = [];

  let placed: ConversationViewState["entries"] | undefined;
  const render = (state: ConversationViewState) => {
    // As an app does it: the transcript only when the entries changed (a live frame keeps them), and then
    // only the new ones (entries are append-only; this page loads no older ones).
    if (state.entries !== placed) {
      placed = state.entries;
      let first = state.entries.length;
      while (first > 0 && !rendered.has(state.entries[first - 1]!.id)) first -= 1;
      for (const entry of state.entries.slice(first)) {
        rendered.add(entry.id);
        const item = document.createElement("li");
        item.textContent =
          entry.kind === "pi.assistant"
            ? textOf((entry.payload as unknown as { message: AssistantMessage }).message)
            : JSON.stringify(entry.payload);
        list.append(item);
        for (const listener of entryListeners) listener(entry);
      }
    }
    const latest = state.entries.at(-1);
    const answered =
      latest?.kind === "pi.assistant" && latest.id > runStartedAfter
        ? textOf((latest.payload as unknown as { message: AssistantMessage }).message)
        : "";
    const text = state.streaming?.answer
      ? textOf(state.streaming.answer.message)
      : state.live.generation?.message
        ? textOf(state.live.generation.message)
        : answered;
    if (text !== shownText) {
      shownText = text;
      answer.textContent = text;
      if (text) shown.push({ at: now(), length: text.length });
    }
  };

  const bench: StreamBench = {
    seed: (count) => client.call<number>("seed", count),
    costs: () => costs,
    entriesShown: () => rendered.size,
    async run() {
      shown = [];
      costs = [];
      runStartedAfter = store.state?.entries.at(-1)?.id ?? 0;
      const id = store.state!.conversationId;
      const submission = await client.submit(id, { type: "input", content: "go" });
      await client.waitForSubmission(submission);
      await new Promise((resolve) => setTimeout(resolve, 100)); // the final commit's update reaches the page
      const chunks = await client.call<Array<{ at: number; length: number }>>("chunks");
      return { latencies: latenciesOf(chunks, shown), updates: shown.length, streamMs: chunks.at(-1)!.at - chunks[0]!.at };
    },
    async writeToScreen() {
      const id = store.state!.conversationId;
      const started = performance.now();
      const seen = new Promise<void>((resolve) => (entryListeners = [(entry) => entry.kind === "bench.write" && resolve()]));
      await client.submit(id, { type: "write", entry: { kind: "bench.write", data: { at: started } } });
      await seen;
      entryListeners = [];
      return performance.now() - started;
    },
  };
  window.streamBench = bench;
  void (async () => {
    await client.ready();
    const id = await client.rootConversation({ model: `${STREAM_MODEL.provider}/${STREAM_MODEL.id}` });
    await client.watchConversationUpdates(id, (update) => {
      const started = performance.now();
      render(store.apply(update));
      const pageMs = performance.now() - started;
      costs.push({ type: update.type, bytes: JSON.stringify(update).length, pageMs });
      if (update.type === "snapshot") bench.openedMs ??= performance.now();
    });
    document.body.dataset.ready = "true";
  })();
}
