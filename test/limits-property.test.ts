import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createRegistry, defineExtension, defineTask, Harness, type Json } from "../src/index.ts";
import { backends, ctx, doneTask, hostileJson, openHarness } from "./support.ts";

// Random deep, wide and huge JSON at every kernel boundary, against small limits: a value within them is
// accepted, one past them is refused with InvalidInput naming the limit — nothing else, nothing written —
// and afterwards a normal task still runs, inspect() answers and a copy of the database opens (S11).

const limits = { maxDepth: 8, maxBytes: 2000 };

/** The values the phase-side boundaries write, by the token in their task's input. */
const staged = new Map<number, unknown>();
let tokens = 0;

const done = doneTask("prop.done");
type Write = "checkpoint" | "outcome" | "memo" | "child";
const writer = defineTask<{ write: Write; token: number }, { phase: "go" | "next"; value?: Json }, Json>({
  name: "prop.writer",
  version: 1,
  initial: () => ({ phase: "go" }),
  phases: {
    go: async (task, runtime, context) => {
      const value = staged.get(task.input.token) as Json;
      const { write } = task.input;
      if (write === "memo") await runtime.memo("value", value, context);
      await runtime.commit((tx) => {
        if (write === "child") tx.createTask(done, value, { background: true });
        return write === "checkpoint"
          ? { status: "running", checkpoint: { phase: "next", value } }
          : { status: "terminal", outcome: { status: "completed", result: write === "outcome" ? value : "ok" } };
      }, context);
    },
    next: async (_t, runtime, context) =>
      runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "ok" } }), context),
  },
  abort: async () => {},
});
const registry = () => createRegistry().install(defineExtension({ name: "prop", tasks: [done, writer] }));

const leaf = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
  fc.string({ unit: "binary", maxLength: 20 }),
);
/** Nested `levels` deep, alternating arrays and objects, around a leaf. */
const deep = fc.tuple(fc.integer({ min: 0, max: 3 * limits.maxDepth }), leaf, fc.string({ maxLength: 3 })).map(([levels, inner, key]) => {
  let value: unknown = inner;
  for (let i = 0; i < levels; i++) value = i % 2 ? [value] : { [key]: value };
  return value;
});
const wide = fc.array(fc.oneof(fc.integer(), fc.constant("é")), { maxLength: 1500, size: "max" });
const huge = fc.string({ unit: "binary", maxLength: 2500, size: "max" });
const value = fc.oneof(deep, wide, huge, fc.jsonValue({ maxDepth: 10 }), hostileJson(4));

/** Independent of the code under test: levels of nesting and UTF-8 bytes as JSON. */
function levels(v: unknown): number {
  if (typeof v !== "object" || v === null) return 0;
  return 1 + Math.max(0, ...Object.values(v).map(levels));
}
const expected = (v: unknown) =>
  levels(v) > limits.maxDepth ? "maxDepth" : new TextEncoder().encode(JSON.stringify(v)).length > limits.maxBytes ? "maxBytes" : "accepted";

/** The value as the boundary stores it (a checkpoint, an outcome and a submission wrap it). */
const stored = (boundary: (typeof boundaries)[number], v: unknown) =>
  boundary === "checkpoint"
    ? { phase: "next", value: v }
    : boundary === "outcome"
      ? { status: "completed", result: v }
      : boundary === "submission"
        ? { entry: { kind: "app.value", data: v } }
        : v;

const boundaries = ["createTask", "document", "entry", "submission", "checkpoint", "outcome", "memo", "child"] as const;

for (const backend of backends) {
  describe(`limits at every boundary on ${backend.name} (property)`, () => {
    it("R9/S11: within the limits accepted; past them InvalidInput naming the limit; never a wedge, never a brick", async () => {
      await fc.assert(
        fc.asyncProperty(value, fc.constantFrom(...boundaries), async (input, boundary) => {
          const storage = await backend.create();
          const { harness } = await openHarness(storage, { registry: registry(), resume: true, settings: { limits } });
          const root = await harness.root(ctx);
          const want = expected(stored(boundary, input));
          let refused: unknown;
          if (["checkpoint", "outcome", "memo", "child"].includes(boundary)) {
            const token = ++tokens;
            staged.set(token, input);
            const id = await root.commit((tx) => tx.createTask(writer, { write: boundary as Write, token }), ctx);
            const ended = (await harness.waitForTask(id, ctx)).state;
            staged.delete(token);
            if (ended.status === "terminal" && ended.outcome.status === "faulted") refused = ended.outcome;
            else expect(ended).toMatchObject({ status: "terminal", outcome: { status: "completed" } });
            if (want !== "accepted") expect(refused).toMatchObject({ error: { message: expect.stringContaining(`limits.${want}`) } });
          } else {
            const before = await storage.exportImage();
            const write = {
              createTask: () => root.commit((tx) => tx.createTask(done, input), ctx),
              document: () => root.commit((tx) => tx.setDocument("app", "value", input as Json), ctx),
              entry: () => root.commit((tx) => tx.appendEntry({ kind: "app.value", payload: input as Json }), ctx),
              submission: () => root.submit({ type: "write", entry: { kind: "app.value", data: input as Json } }, ctx),
            }[boundary as "createTask"];
            refused = await write().then(
              () => undefined,
              (error: unknown) => error,
            );
            if (refused !== undefined) {
              expect(refused).toMatchObject({ name: "InvalidInput", limit: want });
              expect(await storage.exportImage()).toEqual(before);
            }
          }
          expect(refused === undefined ? "accepted" : want).toBe(want);
          // Never a wedge: a normal task runs and inspect answers. Never a brick: a copy opens writable.
          const id = await root.commit((tx) => tx.createTask(done, 1), ctx);
          expect((await harness.waitForTask(id, ctx)).state).toMatchObject({ status: "terminal", outcome: { status: "completed" } });
          await harness.inspect(ctx);
          const copy = await Harness.open(
            await backend.fromImage(await storage.exportImage()),
            { registry: registry(), settings: { limits } },
            ctx,
          );
          await copy.inspect(ctx);
          await copy.close(ctx);
          await harness.close(ctx);
        }),
        { numRuns: backend.name === "MemoryStorage" ? 150 : 60 },
      );
    }, 120_000);
  });
}
