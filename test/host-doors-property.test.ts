/**
 * Property (issue 21 item 2): random arguments for every protocol method, through the host's endpoint. Every
 * refusal is one of the library's typed errors, a refused call changes nothing in the database, and the
 * conversation still answers afterwards.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { deserializeError, serializeError } from "../src/host/error-wire.ts";
import { isMethod, type MethodName, PROTOCOL } from "../src/host/protocol.ts";
import { DurableError } from "../src/index.ts";
import { answer, ScriptedModels } from "./agent-support.ts";
import { served } from "./doors-support.ts";
import { flush, hostileJson } from "./support.ts";

/** `close` ends the host for good when its arguments are right; every other method is driven. */
const METHODS = (Object.keys(PROTOCOL) as MethodName[]).filter((name) => name !== "close");

/** A value nested `levels` deep (printed by its depth in a counterexample: fast-check's printer recurses). */
function deep(levels: number): unknown {
  let value: unknown = "bottom";
  for (let level = 0; level < levels; level++) value = level % 2 ? { next: value } : [value];
  return Object.assign(value as object, { [fc.toStringMethod]: () => `deep(${levels})` });
}

/** Values near and far from what each method takes: ids, kinds, drafts, changes, SQL, and anything at all. */
const value: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom<unknown>(1, 2, 3, 0, -1, 1.5, 2 ** 60, "1", "", "example.counter", "faux/faux-1") },
  { weight: 2, arbitrary: fc.constantFrom<unknown>(null, undefined, true, [], {}, "SELECT 1", "DELETE FROM tasks", "constructor") },
  {
    weight: 3,
    arbitrary: fc.constantFrom<unknown>(
      { type: "input", content: "hello" },
      { type: "input", content: [5] },
      { type: "input", content: [null] },
      { type: "input", content: [{ type: "bogus" }] },
      { type: "input", content: [{ type: "image" }] },
      { type: "input", content: [{ type: "text", text: 7 }] },
      { type: "input", content: "x", whenBusy: "later" },
      { type: "write", entry: {} },
      { type: "write", entry: { kind: "app.note", data: { n: 1 } } },
      { to: 1 },
      { key: 5 },
      { key: "k" },
      { conversationId: "1" },
      { model: 5 },
      { model: "faux/faux-1" },
      { tools: "all" },
      { instructions: null },
      Object.assign(Object.create(null), { type: "input", content: "no prototype" }),
      { __proto__: { type: "input" }, content: "inherited type" },
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom(deep(300), deep(5_000)) },
  { weight: 3, arbitrary: hostileJson(2) },
  {
    weight: 3,
    arbitrary: fc.anything({
      maxDepth: 3,
      withBigInt: true,
      withDate: true,
      withMap: true,
      withSet: true,
      withNullPrototype: true,
      withTypedArray: true,
      withSparseArray: true,
      withObjectString: true,
      withBoxedValues: true,
      key: fc.oneof(fc.string(), fc.constantFrom("__proto__", "constructor", "type", "content", "key")),
    }),
  },
);

const command = fc.record({
  method: fc.oneof({ weight: 19, arbitrary: fc.constantFrom<unknown>(...METHODS) }, { weight: 1, arbitrary: hostileJson(1) }),
  subscribe: fc.boolean(),
  args: fc.oneof({ weight: 9, arbitrary: fc.array(value, { maxLength: 4 }) }, { weight: 1, arbitrary: value }),
});

const PENDING: unique symbol = Symbol("pending");

describe("property: random arguments for every protocol method", () => {
  it("refusals are typed errors, a refused call changes nothing, and the conversation still answers", async () => {
    let calls = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 5, maxLength: 30 }), async (commands) => {
        const models = new ScriptedModels(Array.from({ length: 60 }, () => answer("still here")));
        const host = await served(models);
        const { endpoint, root, image } = host;
        for (const { method, subscribe, args } of commands) {
          const kind = subscribe ? "subscribe" : typeof method === "string" && isMethod(method) ? PROTOCOL[method].kind : "call";
          const before = await image();
          const started =
            kind === "subscribe"
              ? endpoint.subscribe(method as string, args as unknown[], () => {})
              : endpoint.call(method as string, args as unknown[]);
          const outcome: { result: unknown } | { error: unknown } | typeof PENDING = await Promise.race([
            started.then(
              (result: unknown) => ({ result }),
              (error: unknown) => ({ error }),
            ),
            flush(10).then((): typeof PENDING => PENDING),
          ]);
          calls++;
          if (outcome === PENDING) continue; // a wait on a live task or submission: accepted, it writes nothing itself
          if ("error" in outcome) {
            refused++;
            const { error } = outcome;
            expect(error, `${show(method)}(${show(args)}) threw ${(error as Error).message}`).toBeInstanceOf(DurableError);
            // Typed on the wire too: the class of that name comes back.
            expect(deserializeError(serializeError(error)).constructor).toBe((error as Error).constructor);
            await flush(5);
            expect(await image(), `${show(method)}(${show(args)}) was refused but changed the database`).toBe(before);
          } else if (kind === "subscribe" && "result" in outcome) {
            await endpoint.unsubscribe(outcome.result as number);
          }
        }
        // Whatever was accepted (a config change, an abort), the conversation still answers a well-formed input.
        await host.service.configure(root, { model: "faux/faux-1", tools: null, instructions: null });
        const id = await host.service.submit(root, { type: "input", content: [{ type: "text", text: "are you there?" }] });
        expect(await host.service.waitForSubmission(id)).toMatchObject({ status: "done" });
        await host.service.close();
      }),
      { numRuns: 30, seed: 212 },
    );
    console.log(`property test: ${calls} random calls, ${refused} refused with typed errors`);
    expect(refused).toBeGreaterThan(calls / 2);
  }, 120_000);
});

function show(args: unknown): string {
  try {
    return fc.stringify(args).slice(0, 200);
  } catch {
    return "(unprintable)";
  }
}
