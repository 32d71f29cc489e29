/// <reference lib="webworker" />
/**
 * The streaming bench's worker: `serveHarness` with the default settings (persistWithinMs 1000) and pi-ai's
 * faux provider as the model, the same stream the page renders directly for the baseline. Each chunk is
 * timestamped as it leaves the model stream (`timeOrigin + now()`, comparable with the page's clock).
 */
import { type AssistantMessageEvent, createModels, fauxAssistantMessage, fauxProvider, type Models } from "@earendil-works/pi-ai";
import { serveHarness } from "../../../src/browser/worker.ts";
import { BACKGROUND_CONTEXT as ctx, type Harness } from "../../../src/index.ts";
import { STREAM_MODEL, STREAM_TEXT, STREAM_TOKEN_SIZE, STREAM_TOKENS_PER_SECOND } from "./stream-text.ts";

const now = () => performance.timeOrigin + performance.now();
const config = JSON.parse(self.name) as { path: string; pool: string };

const faux = fauxProvider({
  api: "bench-faux",
  provider: STREAM_MODEL.provider,
  models: [{ id: STREAM_MODEL.id }],
  tokensPerSecond: STREAM_TOKENS_PER_SECOND,
  tokenSize: STREAM_TOKEN_SIZE,
});
faux.setResponses(Array.from({ length: 1000 }, () => fauxAssistantMessage(STREAM_TEXT)));
const catalog = createModels();
catalog.setProvider(faux.provider);

/** Chunk times of the current answer: when the text reached each length, on the absolute clock. */
let chunks: Array<{ at: number; length: number }> = [];
const textLength = (event: AssistantMessageEvent) =>
  "partial" in event ? event.partial.content.reduce((sum, part) => sum + (part.type === "text" ? part.text.length : 0), 0) : 0;

// The harness's model catalog, with each stream's events stamped as the generation takes them.
const models = new Proxy(catalog, {
  get(target, key, receiver) {
    if (key !== "streamSimple") {
      const value = Reflect.get(target, key, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    }
    return (...args: Parameters<Models["streamSimple"]>) => {
      const stream = target.streamSimple(...args);
      chunks = [];
      return {
        async *[Symbol.asyncIterator]() {
          for await (const event of stream) {
            if (event.type === "text_delta") chunks.push({ at: now(), length: textLength(event) });
            yield event;
          }
        },
        result: () => stream.result(),
      };
    };
  },
});

serveHarness({
  path: config.path,
  poolDirectory: config.pool,
  models,
  methods: {
    chunks: () => chunks,
    /** Appends `count` small entries to the root conversation (a long conversation), in commits of 1,000. */
    seed: async (harness: Harness, count) => {
      const root = await harness.root(ctx, { agent: { model: `${STREAM_MODEL.provider}/${STREAM_MODEL.id}` } });
      for (let made = 0; made < Number(count); ) {
        const batch = Math.min(1000, Number(count) - made);
        await root.commit((tx) => {
          for (let index = 0; index < batch; index++)
            tx.appendEntry({ kind: "bench.note", payload: { text: `note ${made + index}: a line of the conversation` } });
        }, ctx);
        made += batch;
      }
      return root.id;
    },
  },
});
