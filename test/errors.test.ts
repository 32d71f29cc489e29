import { expect, it } from "vitest";
import * as errors from "../src/errors.ts";

it("every error class has a stable name that survives minification (it is spelled out, not derived)", () => {
  const classes = Object.entries(errors).filter(([, value]) => typeof value === "function");
  expect(classes.length).toBeGreaterThan(10);
  for (const [exportName, ErrorClass] of classes) {
    const instance = new (ErrorClass as new (...args: unknown[]) => Error)("x", [], "x", "x", []);
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

it("one registry: every class says whether it is worth retrying, and crosses a wire as itself (instanceof holds)", async () => {
  const { RETRYABLE, isRetryable } = await import("../src/retryable.ts");
  const { deserializeError, serializeError } = await import("../src/host/error-wire.ts");
  const classes = Object.entries(errors).filter(([, value]) => typeof value === "function");
  expect(Object.keys(RETRYABLE).sort()).toEqual(classes.map(([name]) => name).sort());
  for (const [name, ErrorClass] of classes) {
    const instance = new (ErrorClass as new (...args: unknown[]) => Error)("x", [], "x", "x", []);
    const across = deserializeError(JSON.parse(JSON.stringify(serializeError(instance))));
    expect(across, name).toBeInstanceOf(ErrorClass as new () => Error);
    expect(across.name).toBe(name);
    expect(isRetryable(across), name).toBe(RETRYABLE[name as keyof typeof RETRYABLE]);
  }
  expect(isRetryable(new errors.ConnectionLost())).toBe(true);
  expect(isRetryable(new errors.InvalidSubmission("bad"))).toBe(false);
  expect(isRetryable(new Error("ConnectionLost"))).toBe(false); // not the library's
});

it("a leader's ConnectionLost reaches a follower as ConnectionLost, so the follower's loss check is instanceof", async () => {
  const { isLoss } = await import("../src/browser/tabs/retry.ts");
  const { deserializeError, serializeError } = await import("../src/host/error-wire.ts");
  const fromLeader = deserializeError(serializeError(new errors.ConnectionLost()));
  expect(isLoss(fromLeader)).toBe(true);
  const lookalike = Object.assign(new Error("lost"), { name: "ConnectionLost" });
  expect(isLoss(lookalike)).toBe(false);
});
