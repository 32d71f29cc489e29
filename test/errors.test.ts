import { expect, it } from "vitest";
import * as errors from "../src/errors.ts";

it("every error class has a stable name that survives minification (it is spelled out, not derived)", () => {
  const classes = Object.entries(errors).filter(([, value]) => typeof value === "function");
  expect(classes.length).toBeGreaterThan(10);
  for (const [exportName, ErrorClass] of classes) {
    const instance = new (ErrorClass as new (...args: unknown[]) => Error)("x", []);
    expect(instance).toBeInstanceOf(errors.DurableError);
    expect(instance.name).toBe(exportName);
    // The source spells the name out: renaming the class (as a minifier does) cannot change it.
    expect(ErrorClass.toString()).toContain(`"${exportName}"`);
  }
});

it("bad input: a registry without the built-in tasks is refused at open with a clear error", async () => {
  const { BACKGROUND_CONTEXT, Harness, MemoryStorage, Registry, InvalidSetting } = await import("../src/index.ts");
  await expect(Harness.open(new MemoryStorage(), { registry: new Registry() }, BACKGROUND_CONTEXT)).rejects.toThrow(InvalidSetting);
  await expect(Harness.open(new MemoryStorage(), { registry: new Registry() }, BACKGROUND_CONTEXT)).rejects.toThrow(
    /built-in tasks pi\.generation, pi\.tool, pi\.compaction: create it with createRegistry/,
  );
});
