import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { cloneJson, deepFreeze, jsonEqual } from "../src/base/json.ts";
import { HostClient } from "../src/host/client.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import {
  createRegistry,
  DatabaseCorrupt,
  defineExtension,
  defineTask,
  Harness,
  InvalidInput,
  InvalidSetting,
  type Json,
  MemoryStorage,
  type Storage,
} from "../src/index.ts";
import { admitJson, checkJson, utf8Length } from "../src/limits.ts";
import { jsonProblem } from "../src/shape.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { backends, ctx, doneTask, nested, openHarness } from "./support.ts";

const done = doneTask("test.done");
/** Commits the checkpoint, outcome or memo its input asks for, `levels` deep. */
const writer = defineTask<{ write: "checkpoint" | "outcome" | "memo"; levels: number }, { phase: "go" | "next"; deep?: Json }, Json>({
  name: "test.writer",
  version: 1,
  initial: () => ({ phase: "go" }),
  phases: {
    go: async (task, runtime, context) => {
      const deep = nested(task.input.levels) as Json;
      if (task.input.write === "memo") await runtime.memo("deep", deep, context);
      await runtime.commit(
        () =>
          task.input.write === "checkpoint"
            ? { status: "running", checkpoint: { phase: "next", deep } }
            : { status: "terminal", outcome: { status: "completed", result: task.input.write === "outcome" ? deep : "ok" } },
        context,
      );
    },
    next: async (_t, runtime, context) =>
      runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "next" } }), context),
  },
  abort: async () => {},
});
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [done, writer] }));

/** The harness still works: a normal task runs to its end, `inspect()` answers, a copy of the database reopens. */
async function stillWorks(harness: Harness, storage: Storage, fromImage: (bytes: Uint8Array) => Promise<Storage>): Promise<void> {
  const id = await (await harness.root(ctx)).commit((tx) => tx.createTask(done, { n: 1 }), ctx);
  expect((await harness.waitForTask(id, ctx)).state).toMatchObject({ status: "terminal", outcome: { status: "completed" } });
  await harness.inspect(ctx);
  const copy = await Harness.open(await fromImage(await storage.exportImage()), { registry: registry() }, ctx);
  await copy.inspect(ctx);
  await copy.close(ctx);
}

describe("json: the kernel's JSON helpers never recurse on a value's depth", () => {
  it("cloneJson, deepFreeze and jsonEqual handle a 100,000-deep value; a deep cycle still throws TypeError", () => {
    const deep = nested(100_000);
    const copy = cloneJson(deep);
    expect(jsonEqual(copy, deep)).toBe(true);
    expect(jsonEqual(copy, nested(99_999))).toBe(false);
    deepFreeze(copy);
    let inner = copy as unknown[];
    for (let i = 0; i < 100_000 - 1; i++) inner = inner[0] as unknown[];
    expect(Object.isFrozen(inner)).toBe(true);
    const cycle: unknown[] = [];
    let tip = cycle;
    for (let i = 0; i < 50; i++) tip = tip[0] = [] as unknown[];
    tip.push(cycle);
    expect(() => cloneJson(cycle)).toThrow(TypeError);
  });
});

describe("checkJson: depth, size and shape without recursion", () => {
  const sized = fc.letrec((tie) => ({
    any: fc.oneof({ depthSize: "small" }, fc.jsonValue(), fc.string({ unit: "binary" }), tie("array"), tie("object")),
    array: fc.array(tie("any"), { maxLength: 5 }),
    object: fc.dictionary(fc.string({ unit: "binary" }), tie("any"), { maxKeys: 5 }),
  })).any;

  it("refuses exactly what serializes to more than maxBytes UTF-8 bytes (any strings, surrogates included)", () => {
    fc.assert(
      fc.property(sized, fc.integer({ min: 0, max: 40 }), (value, slack) => {
        const bytes = new TextEncoder().encode(JSON.stringify(value)).length;
        expect(utf8Length(JSON.stringify(value))).toBe(bytes);
        const maxBytes = Math.max(16, bytes - 20 + slack);
        const refused = (() => {
          try {
            checkJson(value, { maxDepth: 512, maxBytes });
            return undefined;
          } catch (error) {
            return error;
          }
        })();
        const admitted = (() => {
          try {
            admitJson(value, { maxDepth: 512, maxBytes }, "A value");
            return undefined;
          } catch (error) {
            return error;
          }
        })();
        for (const outcome of [refused, admitted]) {
          if (bytes <= maxBytes) expect(outcome).toBeUndefined();
          else expect(outcome).toMatchObject({ name: "InvalidInput", limit: "maxBytes" });
        }
      }),
      { numRuns: 1000 },
    );
  });

  it("an admission made inside another (a getter that admits) does not disturb the outer one's measure (decision 0077 reuses one)", () => {
    const limits = { maxDepth: 64, maxBytes: 60 };
    let inner: unknown;
    // {"big":"x…x","i":1} is 64 bytes; a measure the inner admission reset would count only what follows it.
    const value = {
      big: "x".repeat(50),
      get i() {
        inner = admitJson(1, limits, "The inner value");
        return 1;
      },
    };
    expect(() => admitJson(value, limits, "The outer value")).toThrow(expect.objectContaining({ name: "InvalidInput", limit: "maxBytes" }));
    expect(inner).toBe(1);
    expect(admitJson({ a: "y".repeat(40) }, limits, "A value after")).toEqual({ a: "y".repeat(40) });
  });

  it("counts levels of nesting: maxDepth levels pass, one more is refused; a cycle is refused, not a stack overflow", () => {
    for (const depth of [1, 2, 32, 33, 34, 64, 512]) {
      expect(() => admitJson(nested(depth), { maxDepth: depth, maxBytes: 1 << 20 }, "A value")).not.toThrow();
      expect(() => admitJson({ a: nested(depth + 1) }, { maxDepth: depth + 1, maxBytes: 1 << 20 }, "A value")).toThrow(InvalidInput);
      expect(() => checkJson(nested(depth), { maxDepth: depth, maxBytes: 1 << 20 })).not.toThrow();
      expect(() => checkJson(nested(depth + 1), { maxDepth: depth, maxBytes: 1 << 20 })).toThrow(InvalidInput);
      expect(() => checkJson({ a: nested(depth) }, { maxDepth: depth, maxBytes: 1 << 20 })).toThrow(/limits.maxDepth/);
    }
    const cycle: Record<string, unknown> = {};
    cycle.self = [cycle];
    expect(() => checkJson(cycle, { maxDepth: 64, maxBytes: 1 << 20 })).toThrow(InvalidInput);
  });

  it("refuses what is not JSON with limit 'shape'", () => {
    for (const value of [
      Number.NaN,
      Number.POSITIVE_INFINITY,
      undefined,
      () => 1,
      1n,
      Symbol("s"),
      new Date(0),
      new Map(),
      [undefined],
      { a: [1, new Uint8Array(2)] },
    ]) {
      expect(() => checkJson(value, { maxDepth: 64, maxBytes: 1 << 20 }), String(value)).toThrow(
        expect.objectContaining({ name: "InvalidInput", limit: "shape" }),
      );
    }
    expect(() => checkJson({ a: undefined, b: Object.create(null) }, { maxDepth: 64, maxBytes: 1 << 20 })).not.toThrow();
  });
});

describe("one JSON walk (walkJson) behind the host's argument shapes and the harness's limits", () => {
  /** Values JSON and not: plain data, deep nests, and what JSON would drop, null or call (toJSON, own or inherited). */
  const odd = fc.constantFrom<unknown>(
    Number.NaN,
    Number.NEGATIVE_INFINITY,
    () => 1,
    1n,
    Symbol("s"),
    new Date(0),
    new Map(),
    new Uint8Array(1),
    Object.assign([1], { toJSON: () => "an array's own toJSON" }),
    { toJSON: () => 1 },
  );
  const value = fc.letrec((tie) => ({
    any: fc.oneof({ depthSize: "small" }, fc.jsonValue({ maxDepth: 2 }), odd, tie("array"), tie("object"), tie("deep")),
    array: fc.array(fc.oneof(tie("any"), fc.constant(undefined)), { maxLength: 4 }),
    object: fc.dictionary(fc.string({ maxLength: 3 }), fc.oneof(tie("any"), fc.constant(undefined)), { maxKeys: 4 }),
    deep: fc.tuple(fc.integer({ min: 0, max: 12 }), tie("any")).map(([levels, inner]) => (levels === 0 ? inner : [nested(levels), inner])),
  })).any;

  it("jsonProblem (the host's json shape) and checkJson (the harness's limits) refuse the same values at the same depth", () => {
    fc.assert(
      fc.property(value, fc.integer({ min: 1, max: 12 }), fc.boolean(), (generated, maxDepth, cyclic) => {
        const input: unknown = cyclic ? { generated } : generated;
        if (cyclic) (input as Record<string, unknown>).self = [input];
        const problem = jsonProblem(input, "argument 1", maxDepth);
        let refusal: unknown;
        try {
          checkJson(input, { maxDepth, maxBytes: 1 << 30 });
        } catch (error) {
          refusal = error;
        }
        expect(refusal === undefined, `${problem} / ${refusal}`).toBe(problem === undefined);
        if (refusal) expect(refusal).toMatchObject({ name: "InvalidInput", limit: /nests deeper/.test(problem!) ? "maxDepth" : "shape" });
      }),
      { numRuns: 2000 },
    );
  });

  it("a problem names where it is; a cycle is refused as not JSON, not as too deep", () => {
    expect(jsonProblem({ a: [1, { b: Number.NaN }] }, "argument 2")).toBe("argument 2.a[1].b must be JSON; got NaN");
    expect(jsonProblem([0, [undefined]], "x")).toBe("x[1][0] must be JSON; got undefined");
    expect(jsonProblem({ a: nested(5) }, "x", 4)).toBe("x.a[0][0][0] nests deeper than 4 levels");
    const cycle: Record<string, unknown> = {};
    cycle.self = [cycle];
    expect(jsonProblem(cycle, "x")).toBe("x.self[0] must be JSON; it refers to itself");
    expect(() => checkJson(cycle, { maxDepth: 64, maxBytes: 1 << 20 })).toThrow(
      expect.objectContaining({ limit: "shape", message: expect.stringMatching(/a reference to itself/) }),
    );
  });
});

describe("the page's client", () => {
  it("R9: refuses arguments deeper than any harness accepts (they could not even be sent) with InvalidInput, sending nothing", async () => {
    const sent: string[] = [];
    const client = new HostClient({
      call: async (method) => void sent.push(method),
      subscribe: async () => 1,
      unsubscribe: () => {},
    });
    await expect(client.createTask("app.kind", nested(4000) as Json)).rejects.toMatchObject({ name: "InvalidInput", limit: "maxDepth" });
    await expect(client.call("appMethod", nested(600) as Json)).rejects.toBeInstanceOf(InvalidInput);
    expect(sent).toEqual([]);
    await client.createTask("app.kind", nested(500) as Json); // the host decides below its own limit
    expect(sent).toEqual(["createTask"]);
  });
});

describe("the host", () => {
  it("R9: an app method's arguments past settings.limits are InvalidInput and never reach the method; deeper than any harness, too", async () => {
    const seen: unknown[] = [];
    const served = createHost({
      database: "limits",
      openStorage: async () => new MemoryStorage(),
      harness: { registry: registry(), settings: { limits: { maxBytes: 1000 } } },
      methods: { echo: (_harness, ...args) => void seen.push(args) },
      now: () => 0,
    });
    await served.ready;
    const endpoint = hostEndpoint(served.service);
    await expect(endpoint.call("call", ["echo", "x".repeat(2000)])).rejects.toMatchObject({ name: "InvalidInput", limit: "maxBytes" });
    await expect(endpoint.call("call", ["echo", nested(70)])).rejects.toMatchObject({ name: "InvalidInput", limit: "maxDepth" });
    await expect(endpoint.call("createTask", ["test.done", nested(4000)])).rejects.toMatchObject({
      name: "InvalidInput",
      limit: "maxDepth",
    });
    expect(seen).toEqual([]);
    await endpoint.call("call", ["echo", "small"]);
    expect(seen).toEqual([["small"]]);
  });
});

describe("settings.limits", () => {
  it("defaults: 64 levels; 8 MiB, or 1 MiB on storage whose rows are limited; bad values are InvalidSetting", async () => {
    const harness = await Harness.open(new MemoryStorage(), { registry: registry() }, ctx);
    expect(harness.settings.limits).toEqual({ maxDepth: 64, maxBytes: 8 * 1024 * 1024 });
    const limited = Object.assign(new MemoryStorage(), { maxRowBytes: 2_000_000 });
    expect((await Harness.open(limited, { registry: registry() }, ctx)).settings.limits).toEqual({ maxDepth: 64, maxBytes: 1024 * 1024 });
    for (const limits of [{ maxDepth: 0 }, { maxDepth: 513 }, { maxDepth: 1.5 }, { maxBytes: -1 }, { maxBytes: "1" }, { depth: 3 }]) {
      await expect(Harness.open(new MemoryStorage(), { registry: registry(), settings: { limits } as never }, ctx)).rejects.toBeInstanceOf(
        InvalidSetting,
      );
    }
    await expect(
      Harness.open(
        Object.assign(new MemoryStorage(), { maxRowBytes: 2_000_000 }),
        { registry: registry(), settings: { limits: { maxBytes: 3_000_000 } } },
        ctx,
      ),
    ).rejects.toThrow(/holds at most 2000000 bytes/);
  });
});

for (const backend of backends) {
  describe(`R9: limits at every kernel boundary on ${backend.name}`, () => {
    it("R9: a 4,000-deep task input is refused with InvalidInput before anything is written; the harness keeps working", async () => {
      const storage = await backend.create();
      const { harness } = await openHarness(storage, { registry: registry(), resume: true });
      const root = await harness.root(ctx);
      const before = await storage.exportImage();
      const error = await root.commit((tx) => tx.createTask(done, nested(4000)), ctx).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidInput);
      expect(error).toMatchObject({ limit: "maxDepth", message: expect.stringMatching(/input of a test.done task.*64 levels/) });
      expect(await storage.exportImage()).toEqual(before);
      await stillWorks(harness, storage, (bytes) => backend.fromImage(bytes));
    });

    it("R9: a value over maxBytes is refused at createTask, setDocument, appendEntry and submit; at the limit it is accepted", async () => {
      const storage = await backend.create();
      const { harness } = await openHarness(storage, { registry: registry(), resume: true, settings: { limits: { maxBytes: 1000 } } });
      const root = await harness.root(ctx);
      const exactly = "x".repeat(1000 - 2); // "xxx…" is 1000 bytes as JSON
      const over = "é".repeat(500); // 1002 bytes as UTF-8 JSON
      await harness.waitForTask(await root.commit((tx) => tx.createTask(done, exactly), ctx), ctx);
      const before = await storage.exportImage();
      for (const [what, write] of [
        ["input", () => root.commit((tx) => tx.createTask(done, over), ctx)],
        ["Document", () => root.commit((tx) => tx.setDocument("app", "big", over), ctx)],
        ["entry", () => root.commit((tx) => tx.appendEntry({ kind: "app.note", payload: over }), ctx)],
        ["submission", () => root.submit({ type: "input", content: over }, ctx)],
      ] as const) {
        const error = await write().catch((e: unknown) => e);
        expect(error, what).toMatchObject({ name: "InvalidInput", limit: "maxBytes" });
        expect((error as Error).message).toContain(what);
      }
      expect(await storage.exportImage()).toEqual(before);
      await stillWorks(harness, storage, (bytes) => backend.fromImage(bytes));
    });

    for (const write of ["checkpoint", "outcome", "memo"] as const) {
      it(`R9: a phase committing a too-deep ${write} gets InvalidInput; the task ends faulted with it instead of wedging`, async () => {
        const storage = await backend.create();
        const { harness } = await openHarness(storage, { registry: registry(), resume: true });
        const id = await (await harness.root(ctx)).commit((tx) => tx.createTask(writer, { write, levels: 3000 }), ctx);
        const ended = await harness.waitForTask(id, ctx);
        expect(ended.state).toMatchObject({
          status: "terminal",
          outcome: { status: "faulted", error: { message: expect.stringContaining("limits.maxDepth") } },
        });
        await stillWorks(harness, storage, (bytes) => backend.fromImage(bytes));
      });
    }
  });
}

describe("R9: a stored row nested deeper than 1000 levels is damaged, not a wedge or a brick", () => {
  it("S11/B4: sqlite-wasm: a writable open is refused with DatabaseCorrupt, a read-only open inspects the rest", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    const harness = await Harness.open(storage, { registry: registry() }, ctx);
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(done, 1), ctx);
    await root.commit((tx) => tx.createTask(done, 2), ctx);
    await harness.close(ctx);
    const deep = `${"[".repeat(5000)}1${"]".repeat(5000)}`;
    await (storage as SqliteStorage).database.exec(
      `UPDATE tasks SET record = substr(record, 1, instr(record, '"input":') + 7) || '${deep}' || substr(record, instr(record, '"input":') + 9) WHERE id = ${id}`,
    );
    const image = await storage.exportImage();
    const error = await Harness.open(await openSqliteStorage({ vfs: "memory", image }), { registry: registry() }, ctx).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DatabaseCorrupt);
    expect((error as Error).message).toMatch(new RegExp(`task ${id}: the record is nested deeper than 1000 levels`));
    const reader = await Harness.open(
      await openSqliteStorage({ vfs: "memory", image, readOnly: true }),
      { registry: registry(), readOnly: true },
      ctx,
    );
    expect((await reader.inspect(ctx)).tasks.map((task) => task.record.id)).toEqual([id + 1]);
    await expect(reader.getTask(id, ctx)).rejects.toBeInstanceOf(DatabaseCorrupt);
  });

  it("S11/B4: MemoryStorage: the same", async () => {
    const storage = new MemoryStorage();
    const harness = await Harness.open(storage, { registry: registry() }, ctx);
    const id = await (await harness.root(ctx)).commit((tx) => tx.createTask(done, 1), ctx);
    await harness.close(ctx);
    const image = JSON.parse(new TextDecoder().decode(await storage.exportImage()));
    const record = JSON.parse(image.tasks[String(id)]);
    image.tasks[String(id)] = JSON.stringify(record).replace('"input":1', `"input":${"[".repeat(5000)}1${"]".repeat(5000)}`);
    const bytes = new TextEncoder().encode(JSON.stringify(image));
    await expect(Harness.open(MemoryStorage.fromImage(bytes), { registry: registry() }, ctx)).rejects.toBeInstanceOf(DatabaseCorrupt);
    const reader = await Harness.open(MemoryStorage.fromImage(bytes, { readOnly: true }), { registry: registry(), readOnly: true }, ctx);
    expect((await reader.inspect(ctx)).tasks).toEqual([]);
  });
});
