import { inspect } from "node:util";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { cloneJson, deepFreeze, jsonEqual } from "../src/base/json.ts";

// cloneJson copies plain data itself (every step copies a checkpoint) and must give exactly what the JSON round
// trip gives, for any value: the same result (key order, -0, dropped and nulled members) or the same error.

const roundTrip = (value: unknown) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));

function outcome(run: () => unknown): { value: string } | { error: string } {
  try {
    const value = run();
    // inspect shows what JSON.stringify would hide: undefined members, -0, prototypes, key order.
    return { value: inspect(value, { depth: null, showHidden: false }) };
  } catch (error) {
    return { error: (error as Error).name };
  }
}

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}

describe("cloneJson", () => {
  it("equals the JSON round trip for any JSON-ish value, odd members included", () => {
    const odd = fc.oneof(
      fc.constant(undefined),
      fc.constant(Number.NaN),
      fc.constant(-0),
      fc.constant(Number.POSITIVE_INFINITY),
      fc.date({ noInvalidDate: true }),
      fc.constant(new Point(1, 2)),
      fc.constant(() => 1),
      fc.constant({ toJSON: () => "custom" }),
      fc.constant(Object.assign([1, 2], { toJSON: () => "an array's own toJSON" })),
    );
    const value = fc.letrec((tie) => ({
      any: fc.oneof({ depthSize: "small" }, fc.jsonValue(), odd, tie("array"), tie("object")),
      array: fc.array(tie("any"), { maxLength: 4 }),
      object: fc.dictionary(fc.oneof(fc.string(), fc.constant("__proto__"), fc.constant("1")), tie("any"), { maxKeys: 4 }),
    })).any;
    fc.assert(
      fc.property(value, (input) => {
        expect(outcome(() => cloneJson(input))).toEqual(outcome(() => roundTrip(input)));
      }),
      { numRuns: 2000 },
    );
  });

  it("detaches: the copy shares nothing with the input, and a frozen input gives a writable copy", () => {
    const input = Object.freeze({ phase: "step", n: 1, nested: Object.freeze({ list: Object.freeze([1, { a: 2 }]) }) });
    const copy = cloneJson(input);
    expect(copy).toEqual(input);
    expect(copy).not.toBe(input);
    expect(copy.nested).not.toBe(input.nested);
    expect(copy.nested.list[1]).not.toBe(input.nested.list[1]);
    expect(Object.isFrozen(copy)).toBe(false);
  });

  it("throws as JSON does on a cycle and on a BigInt, however deep", () => {
    const cycle: Record<string, unknown> = { a: 1 };
    cycle.self = cycle;
    expect(() => cloneJson(cycle)).toThrow(TypeError);
    expect(() => cloneJson({ deep: [{ n: 1n }] })).toThrow(TypeError);
  });
});

/** A JSON value's text with every object's keys sorted and undefined members dropped: equal texts, equal values. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, member: unknown) =>
    typeof member === "object" && member !== null && !Array.isArray(member)
      ? Object.fromEntries(Object.entries(member).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : member,
  );
}

describe("jsonEqual and deepFreeze", () => {
  // The no-progress check compares two checkpoints after every phase with jsonEqual.
  const value = fc.jsonValue({ maxDepth: 4 });
  const withUndefined = fc.dictionary(fc.string({ maxLength: 3 }), fc.option(fc.jsonValue({ maxDepth: 2 }), { nil: undefined }));

  it("jsonEqual says equal exactly when the canonical texts are equal (key order and undefined members ignored)", () => {
    fc.assert(
      fc.property(fc.oneof(value, withUndefined), fc.oneof(value, withUndefined), (a, b) => {
        expect(jsonEqual(a, b)).toBe(canonical(a) === canonical(b));
        expect(jsonEqual(a, cloneJson(a))).toBe(true);
        const reversed = typeof a === "object" && a !== null && !Array.isArray(a) ? Object.fromEntries(Object.entries(a).reverse()) : a;
        expect(jsonEqual(reversed, a)).toBe(true);
      }),
      { seed: 25, numRuns: 400 },
    );
    expect(jsonEqual({ a: 1, b: undefined }, { a: 1 })).toBe(true);
    expect(jsonEqual({ a: 1 }, { a: 1, b: 2 })).toBe(false);
    expect(jsonEqual({ a: undefined }, { b: undefined })).toBe(true);
    expect(jsonEqual({ a: 1, b: undefined }, { a: 1, c: 3 })).toBe(false);
    // Own members only, as JSON.stringify sees them (decision 0077 walks keys with for…in): inherited ones do not count.
    const inheriting = Object.create({ inherited: 1 }) as Record<string, unknown>;
    inheriting.a = 1;
    expect(jsonEqual(inheriting, { a: 1 })).toBe(true);
    expect(jsonEqual({ a: 1 }, inheriting)).toBe(true);
    expect(jsonEqual(inheriting, { a: 1, inherited: 1 })).toBe(false);
  });

  it("deepFreeze freezes every object and array of a value at any depth, and leaves frozen parts shared", () => {
    fc.assert(
      fc.property(value, (generated) => {
        const shared = Object.freeze({ kept: [1] });
        const record = { generated: cloneJson(generated), shared, list: [{ deep: { deeper: [generated] } }] };
        deepFreeze(record);
        const stack: unknown[] = [record];
        while (stack.length > 0) {
          const item = stack.pop();
          if (typeof item !== "object" || item === null) continue;
          if (item !== shared.kept) expect(Object.isFrozen(item)).toBe(true);
          stack.push(...Object.values(item));
        }
        expect(record.shared).toBe(shared);
        expect(Object.isFrozen(shared.kept)).toBe(false); // a frozen subtree is not walked again
      }),
      { seed: 25, numRuns: 200 },
    );
  });

  it("deepFreeze walks own members only: an inherited enumerable object is left alone (decision 0105's for…in)", () => {
    const inherited = { shared: { x: 1 } };
    const value = Object.create(inherited) as Record<string, unknown>;
    value.own = { y: [1] };
    value.__proto__hostile = { toString: null };
    deepFreeze(value);
    expect(Object.isFrozen(value.own)).toBe(true);
    expect(Object.isFrozen((value.own as { y: unknown }).y)).toBe(true);
    expect(Object.isFrozen(value.__proto__hostile)).toBe(true);
    expect(Object.isFrozen(inherited.shared)).toBe(false);
    const parsed = JSON.parse('{"__proto__": {"a": {"b": 1}}, "c": [{}]}') as Record<string, unknown>;
    deepFreeze(parsed);
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(Object.isFrozen(Object.getOwnPropertyDescriptor(parsed, "__proto__")!.value)).toBe(true);
    expect(Object.isFrozen(Object.prototype)).toBe(false);
  });
});

describe("cloneJson with a polluted Object.prototype (issue 25: members walked with for…in, not Object.keys)", () => {
  it("copies own members only, in their order, as the JSON round trip does", () => {
    const proto = Object.prototype as Record<string, unknown>;
    proto.polluted = { inherited: true };
    try {
      const value = fc.letrec((tie) => ({
        any: fc.oneof({ depthSize: "small" }, fc.jsonValue(), tie("object")),
        object: fc.dictionary(fc.oneof(fc.string(), fc.constant("__proto__"), fc.constant("1"), fc.constant("polluted")), tie("any"), {
          maxKeys: 4,
        }),
      })).any;
      fc.assert(
        fc.property(value, (input) => {
          expect(outcome(() => cloneJson(input))).toEqual(outcome(() => roundTrip(input)));
        }),
        { numRuns: 500 },
      );
      const bare = Object.assign(Object.create(null) as Record<string, unknown>, { b: 1, 2: "two", a: [{ c: null }] });
      expect(JSON.stringify(cloneJson(bare))).toBe('{"2":"two","b":1,"a":[{"c":null}]}');
      expect(Object.hasOwn(cloneJson({ x: 1 }), "polluted")).toBe(false);
    } finally {
      delete proto.polluted;
    }
  });
});
