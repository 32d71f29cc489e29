/**
 * Decision 0117, later (items 1 and 2 of its open seams): the page's status subscription is never swallowed. A subscribe
 * carried over a drop and answered on the next connection with what passes by itself (`AuthorizeFailed`) waits and is
 * asked again (the socket's `unserved`), instead of rejecting to a caller — HostClient's own status subscription, whose
 * rejection nobody heard; a status subscription refused at its first ask is told as `failed` (answered AuthorizeFailed
 * there, it waits as a carried one does: decision 0123); and a refused one
 * is asked again at the next connection, so the status after a reconnect is the host's.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HarnessClient } from "../src/browser/client.ts";
import { type SocketState, socketEndpoint } from "../src/browser/socket.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { type Answer, answeringHost, manualTimer, scriptedSockets, settle } from "./socket-support.ts";

/** Why an unserved subscription waits (decision 0123's review, L3): the host's answer, its hook threw. */
const failedAsk = expect.objectContaining({ name: "AuthorizeFailed" });

describe("the page's status subscription is told, and asked again (decision 0117, later)", () => {
  it("0117 later (1): a subscribe carried over a drop and answered AuthorizeFailed on the next connection waits and is asked again, unserved meanwhile (before: its caller's promise rejected)", async () => {
    const host = answeringHost({ onStatus: "ok", watchConversation: "ok" }, "this page may not see it now.");
    host.answer.watchConversation = "hang";
    const sockets = scriptedSockets(host.endpoint);
    const timer = manualTimer();
    const states: SocketState[] = [];
    const socket = socketEndpoint(sockets.connect, {
      retryMs: 100,
      random: () => 1,
      setTimer: (fire, ms) => timer.setTimer(fire, ms),
      clearTimer: (handle) => timer.clearTimer(handle),
      onState: (state) => states.push(state),
    });
    await settle();
    let settled: string | undefined;
    socket
      .subscribe("watchConversation", [1], () => {})
      .then(
        () => (settled = "answered"),
        (error: Error) => (settled = error.name),
      );
    await settle();
    host.answer.watchConversation = "retry";
    sockets.drop();
    await settle();
    await timer.fire(); // the reconnect: asked again, AuthorizeFailed
    expect(settled).toBeUndefined();
    expect(states.at(-1)).toEqual({ state: "unserved", attempt: 1, retryInMs: 100, error: failedAsk });
    expect(timer.pending).toBe(1);
    await timer.fire(); // asked again: still failing
    expect(states.at(-1)).toEqual({ state: "unserved", attempt: 2, retryInMs: 200, error: failedAsk });
    expect(timer.pending).toBe(1);
    host.answer.watchConversation = "ok";
    await timer.fire();
    expect(settled).toBe("answered");
    expect(states.at(-1)).toEqual({ state: "open" });
    expect(timer.pending).toBe(0);
    expect(host.asked.watchConversation).toBe(4);
    socket.close();
  });

  it("0117 later (1): HarnessClient whose status subscription, unanswered at a drop, is answered AuthorizeFailed on the reconnect: reconnecting, then ready once the host answers (before: reconnecting for good)", async () => {
    const host = answeringHost({ onStatus: "ok", watchConversation: "ok" }, "this page may not see it now.");
    host.answer.onStatus = "hang"; // tells ready, never answers on this connection
    const sockets = scriptedSockets(host.endpoint);
    const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
    await client.ready();
    host.answer.onStatus = "retry";
    sockets.drop();
    await expect.poll(() => host.asked.onStatus, { timeout: 5000 }).toBe(2);
    await settle();
    expect(client.status.kind).toBe("reconnecting");
    host.answer.onStatus = "ok";
    await expect.poll(() => client.status.kind, { timeout: 5000 }).toBe("ready");
    expect(host.asked.onStatus).toBe(3);
    client.terminate();
  });

  it("0117 later (1), 0123: a status subscription answered AuthorizeFailed at its first ask waits (reconnecting) and is asked again on the same connection: the status is ready (0117 later: failed until the next connection)", async () => {
    const host = answeringHost({ onStatus: "ok", watchConversation: "ok" }, "this page may not see it now.");
    host.answer.onStatus = "retry";
    const sockets = scriptedSockets(host.endpoint);
    const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
    const told: HarnessStatus[] = [];
    client.onStatus((status) => told.push(status));
    await expect.poll(() => client.status.kind, { timeout: 5000 }).toBe("reconnecting");
    host.answer.onStatus = "ok";
    await client.ready();
    expect(told.map((status) => status.kind)).toEqual(["starting", "reconnecting", "ready"]);
    client.terminate();
  });

  it("0117 later (2): a status subscription the host refused at a reconnect is asked again at the next one: the status is the host's after it (before: reconnecting for good)", async () => {
    const host = answeringHost({ onStatus: "ok", watchConversation: "ok" }, "this page may not see it now.");
    const sockets = scriptedSockets(host.endpoint);
    const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
    await client.ready();
    await settle(); // answered: the refusal comes at the reconnect's ask (its lost)
    host.answer.onStatus = "refuse";
    sockets.drop();
    await expect.poll(() => client.status.kind, { timeout: 5000 }).toBe("failed");
    expect(client.status).toMatchObject({ error: { name: "NotAuthorized" } });
    host.answer.onStatus = "ok";
    sockets.drop();
    await expect.poll(() => host.asked.onStatus, { timeout: 5000 }).toBe(3);
    await expect.poll(() => client.status.kind, { timeout: 5000 }).toBe("ready");
    client.terminate();
  });

  it("0117 later (2): refused again at the next connection: failed, told once (not a second failed in a row)", async () => {
    const host = answeringHost({ onStatus: "ok", watchConversation: "ok" }, "this page may not see it now.");
    const sockets = scriptedSockets(host.endpoint);
    const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
    await client.ready();
    await settle();
    const told: string[] = [];
    client.onStatus((status) => told.push(status.kind));
    host.answer.onStatus = "refuse";
    sockets.drop();
    await expect.poll(() => client.status.kind, { timeout: 5000 }).toBe("failed");
    sockets.drop();
    await expect.poll(() => host.asked.onStatus, { timeout: 5000 }).toBe(3);
    await settle();
    expect(client.status.kind).toBe("failed");
    expect(told).toEqual(["ready", "reconnecting", "failed", "reconnecting", "failed"]);
    client.terminate();
  });

  it("0117 later (1), property: a subscribe carried over a drop, then any run of answers (served, AuthorizeFailed, refused, none), drops and waits: its caller hears only a refusal or the answer, one wait timer at most, and onState ends open once the host serves it", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(fc.constantFrom<Answer>("ok", "retry", "refuse", "hang"), fc.constantFrom("drop", "fire")), {
          maxLength: 12,
        }),
        async (steps) => {
          const host = answeringHost({ onStatus: "ok", watchConversation: "ok" }, "this page may not see it now.");
          host.answer.watchConversation = "hang";
          const sockets = scriptedSockets(host.endpoint);
          const timer = manualTimer();
          const states: SocketState[] = [];
          const socket = socketEndpoint(sockets.connect, {
            retryMs: 100,
            maxRetryMs: 800,
            random: () => 1,
            setTimer: (fire, ms) => timer.setTimer(fire, ms),
            clearTimer: (handle) => timer.clearTimer(handle),
            onState: (state) => states.push(state),
          });
          await settle();
          let settled: string | undefined;
          socket
            .subscribe("watchConversation", [1], () => {})
            .then(
              () => (settled = "answered"),
              (error: Error) => (settled = error.name),
            );
          await settle();
          sockets.drop(); // carried: asked again on the next connection
          await settle();
          for (const step of steps) {
            if (step === "drop") sockets.drop();
            else if (step === "fire") await timer.fire();
            else host.answer.watchConversation = step;
            await settle();
            // a reconnect and one wait at most; never both a wait and a reconnect's timer for one link
            expect(timer.pending).toBeLessThanOrEqual(1);
            expect(settled === undefined || settled === "answered" || settled === "NotAuthorized").toBe(true);
          }
          host.answer.watchConversation = "ok";
          for (let i = 0; i < 20 && settled === undefined; i++) {
            if (timer.pending === 0) sockets.drop();
            await timer.fire();
          }
          expect(["answered", "NotAuthorized"]).toContain(settled);
          // once ended, asked nowhere again
          const asked = host.asked.watchConversation;
          if (settled === "NotAuthorized") {
            sockets.drop();
            await timer.fire();
            expect(host.asked.watchConversation).toBe(asked);
          } else {
            for (let i = 0; i < 5 && timer.pending > 0; i++) await timer.fire(); // a reconnect under way comes back
            expect(states.at(-1)).toEqual({ state: "open" });
            expect(timer.pending).toBe(0);
          }
          socket.close();
        },
      ),
      { numRuns: 150, seed: 117 },
    );
  }, 120_000);
});
