/**
 * Decision 0143 (review of 0139: the idle lease lapse). A Durable Object instance whose lease lapsed while it was idle
 * (decision 0052: its renewal is parked) keeps its harness open until its alarm ends it; its fence refuses every write
 * `LeaseNotHeld` meanwhile — HTTP 400, not retryable, with advice meant for the harness's owner. A page's Send there was
 * lost. Now that window is answered as the switch is (`ObjectFollowing.switching` is true while the lease has lapsed):
 * `NotReady`, and the page's client sends the write again under its one key, made once by the next instance.
 */
import { describe, expect, it } from "vitest";
import { resendingNotReady } from "../src/browser/not-ready-resend.ts";
import { errorAnswer } from "../src/cloudflare/answers.ts";
import { leaseLapsed } from "../src/cloudflare/lease-lapse.ts";
import { ObjectClock } from "../src/cloudflare/object-clock.ts";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { answeredInSwitch } from "../src/follow/switch-answers.ts";
import { type HostEndpoint, hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessService } from "../src/host/protocol.ts";
import { createRegistry, MemoryStorage, NotReady } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx, flush, runUntil } from "./support.ts";

const note = { type: "write", entry: { kind: "app.note" } };

/** An object's instance on `storage` under a 30 s lease, its harness clock parked (idle), its pages answered in its switch. */
async function instance(storage: MemoryStorage, base: ReturnType<typeof createManualClock>, arbiter: ReturnType<typeof memoryArbiter>) {
  const clock = new ObjectClock(base);
  clock.park(); // idle: the renewal waits for the next event (decision 0052)
  const host = createHost({
    database: "object",
    openStorage: async () => storage,
    harness: { registry: createRegistry(), clock, lease: { place: "object", arbiter } },
    crashPoints: false,
    now: base.now,
  });
  const harness = await host.ready;
  // The object's own check (object.ts → following.ts `switching`): between harnesses while the lease this harness
  // holds has lapsed (review of 0143, L2: before, the test wrote its own copy of it).
  const lapsed = () => leaseLapsed(harness.lease?.epoch, arbiter.record, "object", base.now());
  return { host, harness, lapsed, service: answeredInSwitch(host.service, lapsed) };
}

function settle<T>(call: Promise<T>) {
  const outcome: { value?: T; error?: Error; done: boolean } = { done: false };
  call.then(
    (value) => Object.assign(outcome, { value, done: true }),
    (error: Error) => Object.assign(outcome, { error, done: true }),
  );
  return outcome;
}

describe("a page's calls of an object whose idle lease lapsed (decision 0143)", () => {
  it("S8/S12: Send in the lapse is NotReady (no owner advice), sent again under one key, and made once by the next instance", async () => {
    const base = createManualClock(0);
    const arbiter = memoryArbiter({ clock: base, ttlMs: 30_000 });
    const storage = new MemoryStorage();
    const first = await instance(storage, base, arbiter);
    const conversationId = (await first.harness.root(ctx)).id;
    base.advance(40_000); // idle past the expiry; no event came, so the harness is still open
    expect(first.harness.closed).toBe(false);
    expect(first.lapsed()).toBe(true);
    // Reads are still served from its database.
    expect(await first.service.listConversations()).toEqual(expect.arrayContaining([expect.objectContaining({ id: conversationId })]));

    let current: HarnessService = first.service;
    const sent: unknown[][] = [];
    const object: HostEndpoint = {
      call: (method, args) => {
        sent.push(args);
        return hostEndpoint(current).call(method, args);
      },
      subscribe: () => {
        throw new Error("not used");
      },
      unsubscribe: () => {},
    };
    const page = resendingNotReady(object, { clock: base, random: () => 0.5 });
    const submitted = settle(page.call("submit", [conversationId, note]) as Promise<number>);
    await runUntil(base, () => page.resends >= 2 || submitted.done);
    // Before: LeaseNotHeld at the first answer ("… take the lease again or open read-only"), final: the Send was lost.
    expect(submitted.done).toBe(false);
    const keys = new Set(sent.map((args) => (args[1] as { requestId?: string }).requestId));
    expect(keys.size).toBe(1);
    const [requestId] = [...keys];
    expect(requestId).toEqual(expect.any(String));

    // The alarm ends the instance; the next one takes the lease again under a new epoch and answers.
    await first.harness.close(ctx);
    const next = await instance(storage, base, arbiter);
    expect(next.harness.lease?.epoch).toBe(2);
    current = next.service;
    await runUntil(base, () => submitted.done, 5_000);
    expect(submitted.error).toBeUndefined();
    expect(submitted.value).toBe((await next.harness.storage.findSubmission(conversationId, requestId!))!.id);
    // Sent once more under the same key (a resend that crossed the answer): the same id, one note.
    expect(await page.call("submit", [conversationId, { ...note, requestId }])).toBe(submitted.value);
    const notes = (await next.harness.conversation(conversationId).entries(ctx)).filter((entry) => entry.kind === "app.note");
    expect(notes).toHaveLength(1);
    await next.harness.close(ctx);
  });

  it("S12: POST /rpc's answer in the lapse is 503 NotReady with Retry-After, its message no owner's advice; outside it the host's refusal is kept, final", async () => {
    const base = createManualClock(0);
    const arbiter = memoryArbiter({ clock: base, ttlMs: 30_000 });
    const storage = new MemoryStorage();
    const { host, harness, service, lapsed } = await instance(storage, base, arbiter);
    const conversationId = (await harness.root(ctx)).id;
    // Within the lease (the renewal parked, the expiry not reached): no lapse, the write is made here.
    base.advance(20_000);
    expect(lapsed()).toBe(false);
    expect(await service.submit(conversationId, note as never)).toEqual(expect.any(Number));
    base.advance(20_000);
    expect(lapsed()).toBe(true);
    // The fence's LeaseNotHeld, then (the host reopened read-only once the fence was lost) ReadOnlySession: both NotReady.
    for (const ask of [1, 2]) {
      const error = await service.submit(conversationId, note as never).catch((thrown: unknown) => thrown);
      expect(error, `ask ${ask}`).toBeInstanceOf(NotReady);
      expect((error as Error).message).not.toMatch(/lease|read-only/);
      const answer = errorAnswer(error, false);
      expect(answer.status).toBe(503);
      expect(answer.headers.get("retry-after")).toBe("1");
      await flush(20);
    }
    // Not between harnesses (an app's own harness, no next instance): the host's answer as it is, final (400).
    const kept = await answeredInSwitch(host.service, () => false)
      .submit(conversationId, note as never)
      .catch((thrown: unknown) => thrown);
    expect(kept).not.toBeInstanceOf(NotReady);
    expect(errorAnswer(kept, false).status).toBe(400);
    await harness.close(ctx);
  });

  it("S4 (decision 0145): the status in the lapse says opening — not ready here under the lapsed epoch — also after the host reopened read-only", async () => {
    const base = createManualClock(0);
    const arbiter = memoryArbiter({ clock: base, ttlMs: 30_000 });
    const first = await instance(new MemoryStorage(), base, arbiter);
    const conversationId = (await first.harness.root(ctx)).id;
    expect(first.service.status()).toMatchObject({ kind: "ready", runs: "here", epoch: first.harness.lease!.epoch });
    base.advance(40_000);
    expect(first.service.status()).toEqual({ kind: "opening", database: "object" });
    // The fence's refusal makes the host reopen read-only (its status `ready`, elsewhere): still opening to the page.
    await first.service.submit(conversationId, note as never).catch(() => {});
    await runUntil(base, () => first.harness.closed);
    expect(first.service.status()).toEqual({ kind: "opening", database: "object" });
  });
});
