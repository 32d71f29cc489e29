import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { type ServerAnswerMessage, ServerCallClient, serveServerCall } from "../src/follow/server-call-client.ts";
import { memoryServerCallStore, ServerCalls } from "../src/follow/server-calls.ts";
import { encodeFollowMessage, parseFollowMessage } from "../src/follow/wire.ts";
import {
  defineTool,
  InvalidArguments,
  InvalidDefinition,
  LeaseNotHeld,
  MemoryStorage,
  type ServerCallRequest,
  StaleEpoch,
} from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import {
  answered,
  chargeTool,
  chargingModels,
  closeGate,
  drive,
  resultsOf,
  type Step,
  serverWorld,
  submitCharge,
} from "./server-tools-support.ts";
import { ctx, hostileJson } from "./support.ts";

// Issue 27 item 5 (decision 0036): a tool declares where it can run; a server tool's call from the tab that holds
// the lease is an epoch-checked call to the object, stored there under its call id, so that every retry gets the
// stored answer and the tool never runs twice for one call id.

const CHARGED = (amount: number) => [{ type: "text", text: `charged ${amount}` }];

describe("tools know their place: the declaration", () => {
  it("runsOn is any (the default), page or server; anything else is refused at definition", () => {
    const base = { name: "t", description: "", parameters: { type: "object" }, execute: () => "ok" };
    expect(defineTool(base).runsOn).toBeUndefined();
    for (const place of ["any", "page", "server"] as const) expect(defineTool({ ...base, runsOn: place }).runsOn).toBe(place);
    expect(() => defineTool({ ...base, runsOn: "harness" as never })).toThrow(InvalidDefinition);
    expect(() => defineTool({ ...base, runsOn: "edge" as never })).toThrow(/runsOn must be "any", "page" or "server"/);
  });
});

describe("a server tool while the tab holds the lease (S8, decision 0036)", () => {
  it("runs on the object once; its answer is the tab's one result; the tab never runs it", async () => {
    const world = serverWorld(chargingModels(["call_1"]));
    const tab = await world.openTab(new MemoryStorage());
    await submitCharge(tab.harness);
    await drive(world, () => answered(tab.storage));
    expect(world.runs).toEqual(["object:call_1"]);
    const results = await resultsOf(tab.storage);
    expect(results.get("call_1")).toEqual([CHARGED(5)]);
    // The answer is stored on the object under the call id, with the epoch it was asked under.
    const [stored] = world.store.calls.values();
    expect(stored).toMatchObject({ callId: "call_1", tool: "charge", epoch: 1, answer: { ending: "returned", output: "charging 5\n" } });
    await tab.harness.close(ctx);
  });

  it("while the object runs it, the tab's view shows the call running; its result keeps what the tool streamed there", async () => {
    const world = serverWorld(chargingModels(["call_1"]));
    closeGate(world);
    const tab = await world.openTab(new MemoryStorage());
    const root = await submitCharge(tab.harness);
    await drive(world, () => world.runs.length === 1);
    expect((await root.view(ctx)).live.tools).toMatchObject([{ callId: "call_1", status: "running" }]);
    world.gate.open?.();
    await drive(world, () => answered(tab.storage));
    const entry = (await root.entries(ctx)).find((candidate) => candidate.kind === "pi.tool-result");
    expect(entry?.payload).toMatchObject({ output: "charging 5\n", message: { isError: false } });
    await tab.harness.close(ctx);
  });

  it("decision 0032: an unsafe server call is asked for only once the tab's intent commit is acknowledged", async () => {
    const world = serverWorld(chargingModels(["call_1"]));
    const asked: number[] = [];
    let acknowledge: (() => void) | undefined;
    // The model requests' acknowledgements come at once; the call's intent's waits until the test says.
    const confirm = (position: number) => {
      asked.push(position);
      return asked.length === 2 ? new Promise<void>((resolve) => (acknowledge = resolve)) : Promise.resolve();
    };
    const tab = await world.openTab(new MemoryStorage(), { confirm });
    const root = await submitCharge(tab.harness);
    await drive(world, () => asked.length === 2);
    const [tool] = (await tab.storage.listTasks()).filter((task) => task.kind === "pi.tool");
    expect(tool!.state).toMatchObject({ status: "running", checkpoint: { phase: "server" } });
    expect(asked[1]).toBe((await tab.storage.load()).log!.position); // the intent commit is the head it waits for
    await drive(world, () => world.clock.now() > 5_000 || world.link.delivered.length > 0);
    expect(world.link.delivered).toEqual([]);
    expect(world.runs).toEqual([]);
    acknowledge!();
    await drive(world, () => answered(tab.storage));
    expect(world.runs).toEqual(["object:call_1"]);
    expect((await root.entries(ctx)).filter((entry) => entry.kind === "pi.tool-result")).toHaveLength(1);
    await tab.harness.close(ctx);
  });

  it("S8 a harness without a lease, or without serverCalls, runs a server tool itself as any tool", async () => {
    for (const options of [{ lease: false }, { serverCalls: false }]) {
      const world = serverWorld(chargingModels(["call_1"]));
      const tab = await world.openTab(new MemoryStorage(), options);
      await submitCharge(tab.harness);
      await drive(world, () => answered(tab.storage));
      expect(world.runs).toEqual(["tab:call_1"]);
      expect((await resultsOf(tab.storage)).get("call_1")).toEqual([CHARGED(5)]);
      expect(world.link.delivered).toEqual([]);
      await tab.harness.close(ctx);
    }
  });

  it("S4/S8 a crash of the tab after the call and before the answer: the reopened tab asks again and gets the stored answer", async () => {
    const world = serverWorld(chargingModels(["call_1"]));
    const first = await world.openTab(new MemoryStorage());
    await submitCharge(first.harness);
    // The call reaches the object, which runs it and answers; the answer is lost with the tab.
    await drive(world, () => world.runs.length === 1 && world.link.inFlight.some((m) => m.message.type === "answer"));
    first.kill();
    const image = await first.storage.exportImage();
    const second = await world.openTab(MemoryStorage.fromImage(image));
    expect(second.harness.recovery.tasks.map((task) => task.kind)).toEqual(["pi.tool"]);
    expect(second.harness.lease?.epoch).toBe(2);
    second.harness.resume();
    await drive(world, () => answered(second.storage));
    expect(world.runs).toEqual(["object:call_1"]);
    expect((await resultsOf(second.storage)).get("call_1")).toEqual([CHARGED(5)]);
    await second.harness.close(ctx);
  });

  it("S4/S8 a crash of the tab while the object still runs the call: the new ask joins that run, one run, one result", async () => {
    const world = serverWorld(chargingModels(["call_1"]));
    closeGate(world);
    const first = await world.openTab(new MemoryStorage());
    await submitCharge(first.harness);
    await drive(world, () => world.runs.length === 1);
    first.kill();
    const second = await world.openTab(MemoryStorage.fromImage(await first.storage.exportImage()));
    second.harness.resume();
    // The new tab's asks arrive while the tool still runs; then it returns.
    await drive(world, () => world.link.delivered.filter((d) => d === "object: call").length >= 3);
    world.gate.open?.();
    await drive(world, () => answered(second.storage));
    expect(world.runs).toEqual(["object:call_1"]);
    expect((await resultsOf(second.storage)).get("call_1")).toEqual([CHARGED(5)]);
    await second.harness.close(ctx);
  });

  it("a lost answer is asked for again, a duplicated one is dropped: one run, one result", async () => {
    const world = serverWorld(chargingModels(["call_1"]));
    const tab = await world.openTab(new MemoryStorage());
    await submitCharge(tab.harness);
    const inFlight = (type: string) => () => world.link.inFlight.some((m) => m.message.type === type);
    await drive(world, inFlight("call"));
    await drive(world, inFlight("answer"), [{ pick: 0, action: "deliver" }]);
    world.link.step(0, "drop"); // the answer is lost: the tab asks again
    await drive(world, inFlight("answer"));
    world.link.step(0, "duplicate"); // delivered, and a copy stays in flight
    await world.link.handled;
    await drive(world, () => answered(tab.storage));
    await drive(world, () => world.link.inFlight.length === 0);
    expect(world.link.delivered.filter((d) => d === "object: call").length).toBeGreaterThanOrEqual(2);
    expect(world.link.delivered.filter((d) => d === "tab: answer").length).toBeGreaterThanOrEqual(2);
    expect(world.runs).toEqual(["object:call_1"]);
    expect((await resultsOf(tab.storage)).get("call_1")).toEqual([CHARGED(5)]);
    await tab.harness.close(ctx);
  });

  it("a call under a superseded epoch is refused (StaleEpoch) and runs nothing; the stale tab stops writing, the new one gets the answer", async () => {
    const world = serverWorld(chargingModels(["call_1"]));
    const old = await world.openTab(new MemoryStorage());
    await submitCharge(old.harness);
    await drive(world, () => world.link.inFlight.some((m) => m.message.type === "call"));
    // Another incarnation of the tab takes the lease (epoch 2) from the same history before the old call arrives.
    const image = await old.storage.exportImage();
    const next = await world.openTab(MemoryStorage.fromImage(image));
    expect(next.harness.lease?.epoch).toBe(2);
    // The old incarnation's ask, under epoch 1, is refused by the object.
    const refused = await world.calls
      .call({ ...(world.link.inFlight.find((m) => m.message.type === "call")!.message as { args: [ServerCallRequest] }).args[0] }, ctx)
      .catch((error: unknown) => error);
    expect(refused, String(refused)).toBeInstanceOf(StaleEpoch);
    expect(world.runs).toEqual([]);
    next.harness.resume();
    await drive(world, () => answered(next.storage));
    expect(world.runs).toEqual(["object:call_1"]);
    expect((await resultsOf(next.storage)).get("call_1")).toEqual([CHARGED(5)]);
    // The old tab, superseded, wrote no result.
    expect((await resultsOf(old.storage)).get("call_1")).toBeUndefined();
    await next.harness.close(ctx);
  });
});

const INTERRUPTED_ON_SERVER = [
  { type: "text", text: "<harness>\n[error] Tool charge was interrupted and may have partially run\n</harness>" },
];

describe("a refusal of the tab's epoch by the object (decision 0029, 0036)", () => {
  it("S4 the tab stops as after a lost lease: nothing written, the call's task stays running for the next holder, the tool never ran", async () => {
    // The object knows a newer epoch than the one the tab writes under (another place took the lease).
    const world = serverWorld(chargingModels(["call_1"]), { lease: { record: { epoch: 2, holder: "object" } } });
    const tab = await world.openTab(new MemoryStorage());
    await submitCharge(tab.harness);
    await drive(world, () => tab.harness.closed);
    expect(world.runs).toEqual([]);
    expect(tab.reports).toContainEqual({ kind: "error", error: expect.any(StaleEpoch) });
    const [tool] = (await tab.storage.listTasks()).filter((task) => task.kind === "pi.tool");
    expect(tool!.state).toMatchObject({ status: "running", checkpoint: { phase: "server", arguments: { amount: 5 } } });
    expect((await resultsOf(tab.storage)).get("call_1")).toBeUndefined();
  });
});

describe("server calls over a lossy link (fast-check)", () => {
  it("S8 one execution per call id, one result per tool call, whatever the link does and wherever either side crashes", async () => {
    const step = fc.record({ pick: fc.nat(8), action: fc.constantFrom("deliver", "drop", "duplicate") as fc.Arbitrary<Step["action"]> });
    const crashTurn = fc.option(fc.nat(40), { nil: undefined });
    const endings: string[] = [];
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 30 }), crashTurn, crashTurn, async (schedule, tabCrash, objectCrash) => {
        const world = serverWorld(chargingModels(["call_a", "call_b"]), { slow: true });
        let tab = await world.openTab(new MemoryStorage());
        await submitCharge(tab.harness);
        let turns = 0;
        await drive(
          world,
          async () => {
            const turn = turns++;
            if (turn === objectCrash) world.restartObject();
            if (turn === tabCrash) {
              tab.kill();
              tab = await world.openTab(MemoryStorage.fromImage(await tab.storage.exportImage()));
              tab.harness.resume();
            }
            return answered(tab.storage);
          },
          schedule,
        );
        // The unsafe tool ran at most once per call id, on the object only; each call has one result: what that run
        // returned, or (the object crashed while it ran) the interruption.
        for (const id of ["call_a", "call_b"]) expect(world.runs.filter((run) => run.endsWith(`:${id}`)).length).toBeLessThanOrEqual(1);
        expect(world.runs.every((run) => run.startsWith("object:"))).toBe(true);
        const results = await resultsOf(tab.storage);
        for (const [id, amount] of [
          ["call_a", 5],
          ["call_b", 6],
        ] as const) {
          const ran = world.runs.includes(`object:${id}`);
          const got = results.get(id);
          expect(got?.length).toBe(1);
          expect(ran ? [CHARGED(amount), INTERRUPTED_ON_SERVER] : [INTERRUPTED_ON_SERVER]).toContainEqual(got![0]);
          const stored = [...world.store.calls.values()].find((call) => call.callId === id);
          expect(stored?.answer?.ending).toBe(
            ran && JSON.stringify(got![0]) === JSON.stringify(CHARGED(amount)) ? "returned" : "interrupted",
          );
          endings.push(stored!.answer!.ending);
        }
        await tab.harness.close(ctx);
      }),
      { numRuns: 40 },
    );
    // Both ways of ending were met (the schedules are not all kind).
    expect(new Set(endings)).toEqual(new Set(["returned", "interrupted"]));
  });
});

describe("the asking side drops what it does not wait for", () => {
  it("malformed, unknown or late messages change nothing; the answer it waits for settles the call once; a malformed answer fails it", async () => {
    const clock = createManualClock(0);
    const sent: unknown[] = [];
    const client = new ServerCallClient({ clock, send: (message) => sent.push(message) });
    const request: ServerCallRequest = {
      place: "tab",
      epoch: 1,
      conversationId: 1,
      taskId: 2,
      callId: "c",
      tool: "charge",
      arguments: {},
      replay: "unsafe",
    };
    const call = client.call(request, ctx);
    await fc.assert(
      fc.property(hostileJson(), (value) => {
        client.receive(value);
        client.receive({ type: "answer", id: "2:1", value }); // an id this client never asked under
      }),
    );
    expect(client.waiting).toBe(1);
    clock.advance(200);
    expect(sent).toEqual([sent[0], sent[0]]); // asked again after RESEND_MS, under the same request id
    expect(sent[0]).toEqual({ type: "call", id: "1:1", topic: "server-tools", method: "call", args: [request] });
    const answer = { result: { content: [{ type: "text", text: "ok" }], isError: false }, ending: "returned" };
    client.receive({ type: "answer", id: "1:1", value: answer });
    client.receive({ type: "answer", id: "1:1", value: { ...answer, ending: "threw" } });
    expect(await call).toEqual(answer);
    expect(client.waiting).toBe(0);
    clock.advance(1_000);
    expect(sent.length).toBe(2); // nothing more once answered
    // An answer that is not a ServerCallAnswer fails the ask: the server is checked like any stranger.
    const second = client.call({ ...request, callId: "d" }, ctx);
    client.receive({ type: "answer", id: "1:2", value: { result: "everything", ending: "returned" } });
    await expect(second).rejects.toBeInstanceOf(InvalidArguments);
  });
});

describe("the server's side checks every ask (hostile until checked)", () => {
  const setup = () => {
    const clock = createManualClock(1_000);
    const arbiter = memoryArbiter({ clock, ttlMs: 5_000 });
    const world = { runs: [] as string[], gate: {} };
    const tools = new Map([
      ["charge", chargeTool("object", world)],
      ["look", defineTool({ name: "look", description: "", parameters: { type: "object" }, execute: () => "seen" })],
    ]);
    const store = memoryServerCallStore();
    const calls = new ServerCalls({ lease: arbiter, store, clock, tool: (name) => tools.get(name) });
    return { clock, arbiter, calls, store, runs: world.runs };
  };
  const ask = (over: Partial<ServerCallRequest> = {}): ServerCallRequest => ({
    place: "tab",
    epoch: 1,
    conversationId: 1,
    taskId: 2,
    callId: "c",
    tool: "charge",
    arguments: { amount: 5 },
    replay: "unsafe",
    ...over,
  });

  it("refuses a caller that does not hold the current epoch, a malformed ask, and a call id asked for another call", async () => {
    const { arbiter, calls, runs } = setup();
    await expect(calls.call(ask(), ctx)).rejects.toBeInstanceOf(LeaseNotHeld); // nobody holds the lease yet
    await arbiter.acquire("tab", 0);
    await expect(calls.call(ask({ place: "elsewhere" }), ctx)).rejects.toBeInstanceOf(LeaseNotHeld);
    await expect(calls.call(ask({ epoch: 7 }), ctx)).rejects.toBeInstanceOf(LeaseNotHeld);
    await expect(calls.call({ ...ask(), arguments: [1] } as never, ctx)).rejects.toBeInstanceOf(InvalidArguments);
    await expect(calls.call({ ...ask(), extra: 1 } as never, ctx)).rejects.toBeInstanceOf(InvalidArguments);
    await expect(calls.call(ask({ callId: "x".repeat(201) }), ctx)).rejects.toBeInstanceOf(InvalidArguments);
    expect(runs).toEqual([]);
    expect((await calls.call(ask(), ctx)).result.content).toEqual(CHARGED(5));
    await expect(calls.call(ask({ taskId: 3 }), ctx)).rejects.toThrow(/was asked for another call/);
    await expect(calls.call(ask({ arguments: { amount: 6 } }), ctx)).rejects.toThrow(/was asked for another call/);
    await arbiter.acquire("tab", 0); // a restarted tab: epoch 2
    await expect(calls.call(ask(), ctx)).rejects.toBeInstanceOf(StaleEpoch);
    expect((await calls.call(ask({ epoch: 2 }), ctx)).result.content).toEqual(CHARGED(5));
    expect(runs).toEqual(["object:c"]);
  });

  it("runs only its own server tools, with arguments its schema admits; anything else is an error answer, nothing ran", async () => {
    const { arbiter, calls, runs } = setup();
    await arbiter.acquire("tab", 0);
    const notServer = await calls.call(ask({ callId: "d", tool: "look", arguments: {} }), ctx);
    expect(notServer).toMatchObject({ ending: "threw", message: "Tool look is not a server tool of this server" });
    const unknown = await calls.call(ask({ callId: "e", tool: "nope", arguments: {} }), ctx);
    expect(unknown.ending).toBe("threw");
    const invalid = await calls.call(ask({ callId: "f", arguments: { amount: "lots" } }), ctx);
    expect(invalid).toMatchObject({ ending: "threw", result: { isError: true } });
    expect(invalid.message).toMatch(/arguments were refused by the server/);
    expect(runs).toEqual([]);
  });

  it("on the link: a refusal answers the ask's id without the server's stack; random JSON runs nothing", async () => {
    const { arbiter, calls, runs } = setup();
    const sent: ServerAnswerMessage[] = [];
    const call = (args: unknown) => ({ type: "call", id: "1:1", topic: "server-tools", method: "call", args });
    await serveServerCall(calls, call([ask()]), (message) => sent.push(message));
    expect(sent).toEqual([{ type: "answer", id: "1:1", error: expect.objectContaining({ name: "LeaseNotHeld" }) }]);
    expect("stack" in (sent[0] as { error: object }).error).toBe(false);
    await arbiter.acquire("tab", 0);
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          hostileJson(),
          hostileJson().map((value) => call([value])),
          hostileJson().map(call),
        ),
        async (value) => {
          await serveServerCall(calls, value, (message) => sent.push(message));
        },
      ),
    );
    expect(runs).toEqual([]);
  });
});

describe("server calls on the follow link (wire.ts topic server-tools)", () => {
  const request: ServerCallRequest = {
    place: "tab",
    epoch: 1,
    conversationId: 1,
    taskId: 2,
    callId: "call_1",
    tool: "charge",
    arguments: { amount: 5 },
    replay: "unsafe",
  };
  it("the tab's ask crosses as a call of topic server-tools; the object may not make one; a malformed request is refused with its id", () => {
    const sent: unknown[] = [];
    const client = new ServerCallClient({ clock: createManualClock(0), send: (message) => sent.push(message) });
    void client.call(request, ctx).catch(() => {});
    const frame = encodeFollowMessage(sent[0] as never);
    expect(parseFollowMessage(frame, "tab")).toEqual({ message: sent[0] });
    const fromObject = parseFollowMessage(frame, "object");
    expect("error" in fromObject && fromObject.error.message).toMatch(/server-tools calls are the tab's to make/);
    const forged = parseFollowMessage(JSON.stringify({ ...(sent[0] as object), args: [{ ...request, epoch: 0 }] }), "tab");
    expect(forged).toMatchObject({ id: "1:1", error: { name: "FollowMessageRefused" } });
  });
});
