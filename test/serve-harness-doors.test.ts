/**
 * Decision 0117, later (its review's finding 5): `serveHarness({ authorize, onAuthorizeError })` carries the callback to
 * the door it exposes to its page. Run in Node with the worker's scope stood in by one end of a MessageChannel (the
 * database cannot open here: no OPFS; the door answers before the harness is asked).
 */
import { afterEach, expect, it } from "vitest";
import { wrapHost } from "../src/browser/comlink.ts";
import { serveHarness } from "../src/browser/worker.ts";
import { AuthorizeFailed } from "../src/errors.ts";
import type { AuthorizeErrorAt } from "../src/host/doors.ts";

const scope = globalThis as Record<string, unknown>;
const restore: Array<() => void> = [];
afterEach(() => {
  for (const undo of restore.splice(0)) undo();
});

it("0117 later (6): serveHarness's onAuthorizeError is told the hook's own error with the page's call (checked by dropping it from the doors: fails)", async () => {
  const channel = new MessageChannel();
  for (const name of ["addEventListener", "removeEventListener", "postMessage"] as const) {
    const had = Object.hasOwn(scope, name);
    const before = scope[name];
    scope[name] = (channel.port1[name] as (...args: never[]) => unknown).bind(channel.port1);
    restore.push(() => (had ? (scope[name] = before) : delete scope[name]));
  }
  channel.port1.start();
  restore.push(() => {
    channel.port1.close();
    channel.port2.close();
  });
  const failure = new Error("the permission store is down");
  const told: Array<[unknown, AuthorizeErrorAt<unknown>]> = [];
  const served = serveHarness({
    crashPoints: false,
    authorize: (_caller, call) => {
      if (call.method === "inspect") throw failure;
      return true;
    },
    onAuthorizeError: (error, at) => told.push([error, at]),
  });
  restore.push(() => void served.service.close().catch(() => {}));
  const page = wrapHost(channel.port2 as never);
  await expect(page.call("inspect", [])).rejects.toBeInstanceOf(AuthorizeFailed);
  expect(told).toHaveLength(1);
  expect(told[0]![0]).toBe(failure);
  expect(told[0]![1]).toMatchObject({ action: "inspect", door: "host" });
});
