/**
 * Decision 0123 (issue 27's seams, item 5): `serveTabs`'s doors, the leader tab's worker serving the origin's other tabs
 * over a BroadcastChannel, tested as a follower tab reaches them — frame by frame, on the wire `tabs/wire.ts` describes
 * (Node's BroadcastChannel, the Web Locks stand-in). A call its `authorize` refuses is `NotAuthorized` and changes
 * nothing; one whose hook throws is `AuthorizeFailed`, the app told (`onAuthorizeError`, caller `{ from: "tab" }`),
 * and nothing of the hook's error on the wire. A frame that is no message (`null`, a number, no id, no method, args that
 * are not an array) is answered with a typed error under its id (or under none) and loses nothing: before, `null` threw
 * out of the leader's channel listener and a frame without a method reached the host.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { WorkerDoors } from "../src/browser/comlink.ts";
import { serveTabs } from "../src/browser/tabs/leader.ts";
import { channelName, followerLock } from "../src/browser/tabs/wire.ts";
import { DurableError } from "../src/errors.ts";
import type { AuthorizeErrorAt } from "../src/host/doors.ts";
import { deserializeError } from "../src/host/error-wire.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { tabsTestScope } from "./tabs-support.ts";

const { locks, cleanups } = tabsTestScope();

/** Lets queued channel messages and the host's answers run: `turns` macrotasks (no wall-clock wait). */
const turns = async (count = 20) => {
  for (let i = 0; i < count; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** The leader tab's worker: a host on its own database, serving the other tabs through `doors`. */
async function leader(doors?: WorkerDoors) {
  const database = `serve-tabs-doors-${crypto.randomUUID()}`;
  const served = createHost({
    database,
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  serveTabs(served.service, database, doors);
  cleanups.push(() => served.service.close().catch(() => {}));
  await served.ready;
  return { database, service: served.service };
}

type Frame = { type: string; id?: unknown; value?: unknown; error?: { name: string; message: string; stack?: string } };

/** A follower tab at the wire: it asks who leads, connects (holding its life lock), then posts frames as they come. */
async function follower(database: string) {
  const broker = new BroadcastChannel(channelName(database));
  const leading = new Promise<string>((resolve) => {
    broker.onmessage = ({ data }) => data?.type === "leader" && resolve(data.leader);
  });
  broker.postMessage({ type: "who-leads" });
  const leaderId = await leading;
  const connection = `pi-durable-web:tab:test-${crypto.randomUUID()}`;
  const port = new BroadcastChannel(connection);
  const frames: Frame[] = [];
  port.onmessage = ({ data }) => frames.push(data as Frame);
  let release = () => {};
  void locks.request(followerLock(connection), () => new Promise<void>((resolve) => (release = resolve)));
  broker.postMessage({ type: "connect", leader: leaderId, connection });
  for (let i = 0; i < 50 && !frames.some((frame) => frame.type === "accepted"); i++) await turns(1);
  expect(frames.some((frame) => frame.type === "accepted")).toBe(true);
  cleanups.push(() => {
    port.postMessage({ type: "bye" });
    release();
    port.close();
    broker.close();
  });
  let nextId = 1_000;
  /** Posts `frame` and returns the answers that came under `id` (a result or an error), after the leader had its turns. */
  const post = async (frame: unknown, id?: unknown) => {
    const before = frames.length;
    port.postMessage(frame);
    for (let i = 0; i < 50 && !frames.slice(before).some((answer) => answer.id === id && answer.type !== "event"); i++) await turns(1);
    return frames.slice(before).filter((answer) => answer.id === id && answer.type !== "event");
  };
  const call = async (method: string, args: unknown[] = []) => {
    const id = ++nextId;
    const [answer] = await post({ type: "call", id, method, args }, id);
    return answer;
  };
  return { post, call, frames };
}

const conversations = async (service: { listConversations(): Promise<unknown[]> }) => (await service.listConversations()).length;

describe("serveTabs's doors (decision 0123)", () => {
  it("0123 (5): a call authorize refuses is NotAuthorized and changes nothing; the hook sees the caller { from: 'tab' }", async () => {
    const seen: unknown[] = [];
    const { database, service } = await leader({
      authorize: (caller, call) => {
        seen.push(caller);
        return call.method !== "createConversation";
      },
    });
    const tab = await follower(database);
    const before = await conversations(service);
    const refused = await tab.call("createConversation");
    expect(refused).toMatchObject({ type: "error", error: { name: "NotAuthorized" } });
    expect(await conversations(service)).toBe(before);
    expect(seen).toContainEqual({ from: "tab" });
    expect(await tab.call("listConversations")).toMatchObject({ type: "result" }); // the connection still serves
  });

  it("0123 (5): a hook that throws answers AuthorizeFailed, tells onAuthorizeError the tab's call, and puts none of its error on the wire", async () => {
    const told: Array<[unknown, AuthorizeErrorAt<unknown>]> = [];
    const failure = new Error("the permission store at db.internal:5432 is down");
    const { database, service } = await leader({
      authorize: (_caller, call) => {
        if (call.method === "createConversation") throw failure;
        return true;
      },
      onAuthorizeError: (error, at) => told.push([error, at]),
    });
    const tab = await follower(database);
    const before = await conversations(service);
    const failed = await tab.call("createConversation");
    expect(failed).toMatchObject({ type: "error", error: { name: "AuthorizeFailed" } });
    expect(JSON.stringify(failed)).not.toContain("db.internal");
    expect(told).toEqual([[failure, { caller: { from: "tab" }, action: "createConversation", door: "host" }]]);
    expect(await conversations(service)).toBe(before);
  });

  it("0123 (5): hostile frames get a typed error (under their id, or none) and lose nothing; the leader serves on (before: null threw out of its listener)", async () => {
    const { database, service } = await leader();
    const tab = await follower(database);
    await tab.call("createConversation");
    const before = await conversations(service);
    const answers: Frame[] = [];
    for (const [frame, id] of [
      [null, null],
      [42, null],
      ["createConversation", null],
      [[1, 2], null],
      [{ type: "call", method: "createConversation", args: [] }, null],
      [{ type: "call", id: 1, args: [] }, 1],
      [{ type: "call", id: 2, method: 7, args: [] }, 2],
      [{ type: "call", id: 3, method: "createConversation", args: "all of them" }, 3],
      [{ type: "call", id: 4, method: "noSuchMethod", args: [] }, 4],
      [{ type: "call", id: 5, method: "submit", args: [{ toString: 1 }, "x"] }, 5],
      [{ type: "whatever", id: 6 }, 6],
    ] as const) {
      const answered = await tab.post(frame, id);
      expect(answered, JSON.stringify(frame)).toHaveLength(1);
      answers.push(answered[0]!);
    }
    for (const answer of answers) {
      expect(answer.type).toBe("error");
      expect(deserializeError(answer.error as never)).toBeInstanceOf(DurableError);
      expect(answer.error?.stack).toBeUndefined();
    }
    expect(await conversations(service)).toBe(before);
    expect(await tab.call("listConversations")).toMatchObject({ type: "result" });
  });

  it("0123 (5), 0141 (ping), property: whatever a tab posts, a frame with an id is answered once with a result or a typed error (no stack), nothing committed is lost, and the leader serves on", async () => {
    const { database, service } = await leader({ authorize: (_caller, call) => call.method !== "close" });
    const tab = await follower(database);
    await tab.call("createConversation");
    const method = fc.oneof(
      fc.constantFrom(
        "listConversations",
        "createConversation",
        "inspect",
        "getTask",
        "submit",
        "conversationEntries",
        "onStatus",
        "close",
      ),
      fc.string(),
      fc.anything(),
    );
    const frame = fc.oneof(
      fc.anything(),
      fc.record(
        {
          type: fc.oneof(fc.constantFrom("call", "subscribe", "unsubscribe", "bye", "ping"), fc.string()),
          id: fc.oneof(fc.integer({ min: 1, max: 999 }), fc.anything()),
          method,
          args: fc.oneof(fc.array(fc.anything(), { maxLength: 3 }), fc.anything()),
        },
        { requiredKeys: ["type"] },
      ),
    );
    let lastId = 0;
    await fc.assert(
      fc.asyncProperty(frame, async (sent) => {
        const before = await conversations(service);
        // A fresh id each run for the frames that have a usable one (a subscribe's id stays in use once answered).
        const usable =
          typeof sent === "object" && sent !== null && "id" in sent && Number.isSafeInteger(sent.id) && (sent.id as number) > 0;
        const posted = usable ? { ...(sent as object), id: 5_000 + ++lastId } : sent;
        const bye = typeof posted === "object" && posted !== null && (posted as { type?: unknown }).type === "bye";
        fc.pre(!bye); // the tab's own goodbye: the leader drops this connection, as it should
        const expectAnswer =
          usable && (posted as { type?: unknown }).type !== "unsubscribe" && typeof (posted as { type?: unknown }).type === "string";
        const id = usable ? (posted as { id: number }).id : Symbol("no answer expected");
        const start = tab.frames.length;
        const answers = await tab.post(posted, id);
        if ((posted as { type?: unknown } | null)?.type === "ping") {
          // Is this leader there? Answered on the connection, before the app's door, whatever else the frame says
          // (the review of decision 0141, M1): a pong, no result or error under its id.
          expect(tab.frames.slice(start).some((frame) => frame.type === "pong")).toBe(true);
          expect(answers).toEqual([]);
        }
        if (expectAnswer && (posted as { type: string }).type === "call") expect(answers.length).toBe(1);
        expect(answers.length).toBeLessThanOrEqual(1);
        for (const answer of answers) {
          if (answer.type === "error") {
            expect(deserializeError(answer.error as never)).toBeInstanceOf(DurableError);
            expect(answer.error?.stack).toBeUndefined();
          } else expect(answer.type).toBe("result");
        }
        expect(await conversations(service)).toBeGreaterThanOrEqual(before);
        expect(service.status().kind).toBe("ready");
      }),
      { numRuns: 150, seed: 123 },
    );
    expect(tab.frames.some((frame) => frame.type === "gone")).toBe(false);
  });
});
