import type { Models } from "@earendil-works/pi-ai";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { serveTabs } from "../src/browser/tabs/leader.ts";
import { RESEND_WINDOW_MS } from "../src/browser/tabs/retry.ts";
import { ConnectionLost } from "../src/errors.ts";
import { HostClient } from "../src/host/client.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import type { Ownership } from "../src/host/ownership.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, defineExtension, defineTool, type Registry, type Storage } from "../src/index.ts";
import { HANDOVER_KEY_TTL_MS } from "../src/session/tx.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
import { answer, callTool, ScriptedModels } from "./agent-support.ts";
import { doneTask, sqliteMemoryBackend } from "./support.ts";
import { Locks } from "./tabs-support.ts";

// The tabs module (src/browser/tabs/) in Node: Node's BroadcastChannel, and a Web Locks stand-in with the
// part of the API it uses (queued requests, ifAvailable, abort signals, and a holder that dies). Two hosts on
// one storage play the leader tab's worker and a follower tab's own worker; the follower's page is a
// HostClient over tabsEndpoint. What the Chromium e2e (e2e/tabs.e2e.ts) cannot place exactly: a call whose
// answer the dying leader never sent.

const locks = new Locks();
/** Each test its own database name: a leader of an earlier test still answers on its own channel. */
let DATABASE = "";
let storage: Storage;
let closeLater: Array<() => unknown> = [];

beforeEach(async () => {
  (globalThis as { navigator?: unknown }).navigator = { locks };
  storage = await sqliteMemoryBackend.create();
  DATABASE = `tabs-test-${crypto.randomUUID()}`;
});

afterEach(async () => {
  for (const close of closeLater) await close();
  closeLater = [];
});

const quick = doneTask("test.quick");

/** A tab's worker: a host on the shared storage, owning it once `grant()` is called (at once for `owner`). */
function worker(owner: boolean, agent: { registry?: Registry; models?: Models; clock?: ManualClock } = {}) {
  const lifeLock = `life:${crypto.randomUUID()}`;
  void locks.request(lifeLock, () => new Promise<never>(() => {}));
  let grant!: () => void;
  const granted = new Promise<void>((resolve) => (grant = resolve));
  const ownership: Ownership = {
    async acquire(waiting) {
      if (!owner) {
        waiting();
        await granted;
      }
      return () => {};
    },
    cancel: () => {},
    requestTakeover: () => {},
    onTakeoverRequest: () => {},
    lifeLock: async () => lifeLock,
  };
  const served = createHost({
    database: DATABASE,
    openStorage: async () => storage,
    harness: {
      registry: agent.registry ?? createRegistry().install(defineExtension({ name: "test", tasks: [quick] })),
      clock: agent.clock ?? createManualClock(1_000),
      resume: true,
      models: agent.models,
    },
    ownership,
    methods: { hang: () => new Promise(() => {}) },
    now: () => 0,
  });
  serveTabs(served.service, DATABASE);
  // A worker that dies leaves the database as committed: the next worker opens a copy of it (the dead one's
  // harness still holds the old storage, as a crashed worker's handles would be released with it).
  const die = async () => {
    storage = await sqliteMemoryBackend.fromImage(await storage.exportImage());
    locks.die(lifeLock);
  };
  return { ...served, grant, die };
}

/** A follower tab's page: its client over its own worker and, through the broker, the leader's. */
function page(own: ReturnType<typeof worker>) {
  const endpoint = tabsEndpoint(hostEndpoint(own.service));
  closeLater.push(() => endpoint.close());
  return new HostClient(endpoint);
}

function until(client: HostClient, test: (status: HarnessStatus) => boolean): Promise<HarnessStatus> {
  return new Promise((resolve) => {
    const stop = client.onStatus((status) => {
      if (!test(status)) return;
      queueMicrotask(() => stop());
      resolve(status);
    });
  });
}
const role = (wanted: string) => (status: HarnessStatus) => status.kind === "ready" && status.role === wanted;

/** Drops the leader's answers from now on: it dies after running the call, before its answer leaves. */
function silenceAnswers(): () => void {
  const post = BroadcastChannel.prototype.postMessage;
  BroadcastChannel.prototype.postMessage = function (this: BroadcastChannel, message: unknown) {
    if ((message as { type?: string })?.type === "result") return;
    post.call(this, message);
  };
  return () => void (BroadcastChannel.prototype.postMessage = post);
}

describe("tabs: a follower over the leader's worker", () => {
  it("a follower is ready as a follower with the leader's status, and its calls run in the leader's harness", async () => {
    const leader = worker(true);
    const own = worker(false);
    await leader.ready;
    const client = page(own);
    const status = await until(client, role("follower"));
    expect(status).toMatchObject({ kind: "ready", database: DATABASE, role: "follower" });
    expect(own.service.status().kind).toBe("waiting-for-lock"); // its own worker still waits for the database
    const conversation = await client.rootConversation();
    await client.submit(conversation, { type: "write", entry: { kind: "note", data: "from a follower" } });
    const rows = await leader.service.query("SELECT count(*) AS n FROM submissions WHERE request_id LIKE 'pi.handover:%'");
    expect(rows).toEqual([{ n: 1 }]); // with the key the follower added
    await leader.die();
  });

  it("when the leader dies with calls in flight, a submission runs again under its key (once in all) and others reject with ConnectionLost", async () => {
    const leader = worker(true);
    const own = worker(false);
    await leader.ready;
    const client = page(own);
    await until(client, role("follower"));
    const conversation = await client.rootConversation();

    const restore = silenceAnswers();
    const submitted = client.submit(conversation, { type: "write", entry: { kind: "note", data: "in flight" } });
    const created = client.createConversation();
    const hanging = client.call("hang");
    // The leader ran the submission (it is committed) but its answer never left.
    await expect.poll(async () => (await storage.query("SELECT count(*) AS n FROM submissions"))[0]?.n).toBe(1);
    restore();
    await leader.die();

    const errors = await Promise.all(
      [created, hanging].map((call) =>
        call.then(
          () => "resolved",
          (error: Error) => error.name,
        ),
      ),
    );
    expect(errors).toEqual(["ConnectionLost", "ConnectionLost"]);
    own.grant(); // the next worker in the lock's queue opens the database: this tab leads now
    await until(client, role("leader"));
    const id = await submitted;
    expect(await storage.query("SELECT id FROM submissions")).toEqual([{ id }]); // the same submission, once
  });

  it("§4c: a decision in flight when the leader dies is sent again under its key: decided once, the retry answers with the record", async () => {
    const runs = { count: 0 };
    const agent = () => ({
      registry: createRegistry().install(
        defineExtension({
          name: "ask",
          tools: [
            defineTool({
              name: "write_file",
              description: "Write",
              parameters: { type: "object", properties: {} },
              approval: "always",
              execute: () => {
                runs.count++;
                return "written";
              },
            }),
          ],
        }),
      ),
      models: new ScriptedModels([callTool("write_file", {}, "call_1"), answer("done")]).api,
    });
    const leader = worker(true, agent());
    const own = worker(false, agent());
    await leader.ready;
    const client = page(own);
    await until(client, role("follower"));
    const conversation = await client.rootConversation({ model: "faux/faux-1" });
    await client.submit(conversation, { type: "input", content: "write it" });
    await expect.poll(async () => (await client.pendingApprovals(conversation)).length).toBe(1);

    const restore = silenceAnswers();
    const decided = client.decide(conversation, "call_1", { approved: true });
    // The leader committed the decision (with the key the follower added) but its answer never left.
    const stored =
      "SELECT record ->> '$.value.status' AS status, record ->> '$.value.decisionId' AS id FROM documents WHERE key = 'pi.approval:call_1'";
    await expect.poll(async () => (await storage.query(stored))[0]?.status).toBe("approved");
    restore();
    await leader.die();
    own.grant();
    await until(client, role("leader"));
    const record = await decided;
    expect(record).toMatchObject({ status: "approved", by: "person", decisionId: expect.stringMatching(/^pi\.handover:/) });
    expect((await storage.query(stored))[0]?.id).toBe(record.decisionId);
    await expect(client.decide(conversation, "call_1", { approved: false })).rejects.toMatchObject({ name: "AlreadyDecided" });
    await expect.poll(() => runs.count).toBe(1);
  });

  it("R7: 10,000 createTask calls from a follower leave only the hand-over keys of the last five minutes", async () => {
    const clock = createManualClock(1_000);
    const leader = worker(true, { clock });
    const own = worker(false);
    await leader.ready;
    const client = page(own);
    await until(client, role("follower"));
    const keys = async () => (await leader.service.query("SELECT count(*) AS n FROM documents WHERE scope = 'pi.task-keys'"))[0]?.n;
    const secondsApart = 1;
    for (let i = 0; i < 10_000; i++) {
      await client.createTask("test.quick", i);
      clock.advance(secondsApart * 1000);
    }
    // Each call made a key (its task's creation is safe to send again), kept five minutes on the harness clock.
    const bound = HANDOVER_KEY_TTL_MS / 1000 / secondsApart;
    expect(await keys()).toBeLessThanOrEqual(bound + 1);
    expect(await keys()).toBeGreaterThanOrEqual(bound - 1);
    expect(await leader.service.query("SELECT count(*) AS n FROM tasks")).toEqual([{ n: 10_000 }]);
    await leader.die();
  }, 240_000);

  for (const late of [false, true]) {
    it(`R7: a createTask in flight when the leader dies ${late ? "is not sent again past the resend window (ConnectionLost)" : "runs again under its hand-over key: one task"}`, async () => {
      const leader = worker(true);
      const own = worker(false);
      await leader.ready;
      const client = page(own);
      await until(client, role("follower"));
      const restore = silenceAnswers();
      const created = client.createTask("test.quick", "in flight");
      await expect.poll(async () => (await storage.query("SELECT count(*) AS n FROM tasks"))[0]?.n).toBe(1);
      restore();
      const start = Date.now();
      const clock = vi.spyOn(Date, "now").mockImplementation(() => start + (late ? RESEND_WINDOW_MS + 1 : 0));
      try {
        await leader.die();
        own.grant();
        if (late) await expect(created).rejects.toThrow(ConnectionLost);
        else expect(await created).toBe((await storage.query("SELECT id FROM tasks"))[0]?.id);
        await until(client, role("leader"));
        expect(await storage.query("SELECT count(*) AS n FROM tasks")).toEqual([{ n: 1 }]);
      } finally {
        clock.mockRestore();
      }
    });
  }

  it("a view moves to the new leader: its listener gets the new leader's snapshot", async () => {
    const leader = worker(true);
    const own = worker(false);
    await leader.ready;
    const client = page(own);
    await until(client, role("follower"));
    const conversation = await client.rootConversation();
    await client.submit(conversation, { type: "write", entry: { kind: "note", data: "before" } });
    const seen: number[] = [];
    const stop = await client.watchConversation(conversation, (view) => seen.push(view.entries.length));
    await expect.poll(() => seen.at(-1)).toBe(1);
    await leader.die();
    own.grant();
    await until(client, role("leader"));
    await client.submit(conversation, { type: "write", entry: { kind: "note", data: "after" } });
    await expect.poll(() => seen.at(-1)).toBe(2); // the view kept up across the hand-over
    stop();
  });

  it("where there is no broker (here: no Web Locks), a second tab waits for the database as before: its calls reject as not open", async () => {
    (globalThis as { navigator?: unknown }).navigator = undefined;
    const leader = worker(true);
    const own = worker(false);
    await leader.ready;
    const client = page(own);
    await until(client, (status) => status.kind === "waiting-for-lock");
    await expect(client.rootConversation()).rejects.toThrow(/not open \(status: waiting-for-lock\)/);
    await leader.die();
    own.grant(); // the owner went: this tab opens the database itself
    expect(await until(client, (status) => status.kind === "ready")).toMatchObject({ role: "leader" });
  });
});
