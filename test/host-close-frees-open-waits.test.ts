/**
 * Review of decision 0138, L1: a call that reached a host whose open hangs waits for that open (0138); a close started
 * meanwhile frees it — it is answered "not open" — instead of leaving it pending as long as the open hangs.
 */
import { expect, it } from "vitest";
import { DurableError } from "../src/errors.ts";
import { createHost } from "../src/host/host.ts";
import type { Storage } from "../src/index.ts";
import { createRegistry } from "../src/index.ts";
import { macrotask } from "./tabs-support.ts";

it("S6 (0138 review L1): a call waiting for an open that never ends settles once close() starts (before: pending for good)", async () => {
  const served = createHost({
    database: `l1-${crypto.randomUUID()}`,
    openStorage: () => new Promise<Storage>(() => {}), // the storage's open never returns
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  served.ready.catch(() => {});
  for (let i = 0; i < 5; i++) await macrotask();
  let outcome = "pending";
  served.service.createConversation().then(
    () => (outcome = "answered"),
    (error: Error) => (outcome = error instanceof DurableError ? `DurableError ${error.message}` : error.name),
  );
  for (let i = 0; i < 5; i++) await macrotask();
  expect(outcome).toBe("pending"); // it waits for the open (decision 0138)
  void served.service.close().catch(() => {});
  for (let i = 0; i < 5 && outcome === "pending"; i++) await macrotask();
  expect(outcome).toMatch(/^DurableError .*not open/);
});
