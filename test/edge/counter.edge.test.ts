import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type Edge, type ObjectKind, pause, startEdge } from "./support.ts";

let edge: Edge;
beforeAll(async () => {
  edge = await startEdge();
}, 120_000);
afterAll(() => edge?.dispose());

type Json = any;

/**
 * The next answer of the object after a crash: a request that reaches the dying instance fails or is answered
 * by it, so ask until a new instance (a fresh start of the object) answers.
 */
async function fromNextInstance(object: ObjectKind, name: string, path: string, previous: string): Promise<Json> {
  for (let i = 0; i < 200; i++) {
    const response = await edge.call(object, name, path);
    const body = await response.json().catch(() => undefined);
    if (response.ok && body.instance !== previous) return body;
    await pause(20);
  }
  throw new Error(`${object}/${name} never started again`);
}

const lines = (name: string) =>
  edge.printed.lines.filter((line) => line.startsWith(`${name}: `)).map((line) => line.slice(name.length + 2));

describe("S12 Example 12 on a Durable Object with a real crash (ctx.abort)", () => {
  it("aborted right after tick 2: restarts 1 in the seed's query, then tick 3..5, never tick 2 twice", async () => {
    const { id, instance } = await edge.json("counter", "ex12", "/start?to=5&abortAfter=tick%202");
    await edge.printed.until(() => lines("ex12").includes("tick 2"));
    const after = await fromNextInstance("counter", "ex12", "/query", instance);
    // The restarted object opened the harness (recovery) before this request; the work resumes after it.
    expect(after.rows).toEqual([{ id, status: "pending", n: 2, memos: '{"printed-1":true,"printed-2":true}', restarts: 1 }]);
    await edge.printed.until(() => lines("ex12").includes("tick 5"));
    let task: Json;
    for (let i = 0; i < 200 && task?.state.status !== "terminal"; i++) {
      task = (await edge.json("counter", "ex12", `/task?id=${id}`)).task;
      if (task.state.status !== "terminal") await pause(20);
    }
    expect(task.state).toEqual({ status: "terminal", outcome: { status: "completed", result: "counted to 5" } });
    expect(task.restarts).toBeUndefined();
    expect(lines("ex12")).toEqual(["tick 1", "tick 2", "tick 3", "tick 4", "tick 5"]);
  });

  it("S6: a task that aborts its object on every run is stopped by the restart limit after five crashes", async () => {
    const { id, instance } = await edge.json("crasher", "five", "/start");
    let last = instance;
    let task: Json;
    for (let crash = 1; crash <= 5; crash++) {
      await edge.printed.until(() => lines("five").length === crash, `run ${crash}`);
      const next = await fromNextInstance("crasher", "five", `/task?id=${id}`, last);
      last = next.instance;
      task = next.task;
      if (crash < 5) expect(task.restarts).toBe(crash);
    }
    for (let i = 0; i < 100 && task.state.status !== "terminal"; i++) {
      await pause(20);
      task = (await edge.json("crasher", "five", `/task?id=${id}`)).task;
    }
    expect(task.state).toMatchObject({
      status: "terminal",
      outcome: { status: "faulted", error: { detail: { reason: "restart_limit", restarts: 5 } } },
    });
    expect(lines("five")).toEqual([0, 1, 2, 3, 4].map((n) => `run with restarts ${n}`));
  });

  it("S3: a sleeping task is woken by the alarm after an eviction, with no request arriving", async () => {
    const { id } = await edge.json("sleeper", "sleeper", "/sleep?ms=1500");
    let task: Json;
    for (let i = 0; i < 200 && task?.state.status !== "sleeping"; i++)
      task = (await edge.json("sleeper", "sleeper", `/task?id=${id}`)).task;
    expect(task.state.status).toBe("sleeping");
    const { alarm, id: objectId } = await edge.json("sleeper", "sleeper", "/alarm");
    expect(alarm).toBe(task.state.until); // the one alarm, at the sleep's end
    // Evict every object: nothing of the sleeping task is left in memory, and no request comes after this.
    await edge.restart();
    await edge.printed.until(() => lines(objectId).includes("awake"), "awake after the eviction");
    expect([...lines("sleeper"), ...lines(objectId)].filter((line) => line !== "alarm")).toEqual(["awake"]);
    const { task: done } = await edge.json("sleeper", "sleeper", `/task?id=${id}`);
    expect(done.state).toEqual({ status: "terminal", outcome: { status: "completed", result: "awake" } });
  });
});

describe("the heartbeat: an object whose alarm beats every 300 ms while a task runs", () => {
  let fast: Edge;
  beforeAll(async () => {
    fast = await startEdge({ bindings: { HEARTBEAT_MS: "300" } });
  }, 120_000);
  afterAll(() => fast?.dispose());
  const linesOf = (name: string) =>
    fast.printed.lines.filter((line) => line.startsWith(`${name}: `)).map((line) => line.slice(name.length + 2));

  it("the heartbeat alarm revives an object aborted mid-phase, with no request arriving: tick 3..5 follow", async () => {
    const { id, instance, object } = await fast.json("counter", "heartbeat-ex12", "/start?to=5&abortAfter=tick%202");
    // No request from here on: only the alarm can start the object again (it then prints under its id).
    const printed = () => [...linesOf("heartbeat-ex12"), ...linesOf(object)];
    await fast.printed.until(() => printed().includes("tick 5"), "tick 5 after the heartbeat");
    expect(printed()).toEqual(["tick 1", "tick 2", "tick 3", "tick 4", "tick 5"]);
    const { task, instance: now } = await fast.json("counter", "heartbeat-ex12", `/task?id=${id}`);
    expect(now).not.toBe(instance);
    expect(task.state).toEqual({ status: "terminal", outcome: { status: "completed", result: "counted to 5" } });
  });
});

describe("the alarm and work that cannot run (a kind that is not installed)", () => {
  let edge: Edge;
  beforeAll(async () => {
    edge = await startEdge({ bindings: { HEARTBEAT_MS: "300" } });
  }, 120_000);
  afterAll(() => edge?.dispose());
  const alarms = (objectId: string) => edge.printed.lines.filter((line) => line === `${objectId}: alarm`).length;

  it("a pending task of a kind the object does not install keeps no heartbeat going", async () => {
    const { inspection } = await edge.json("sleeper", "blocked", "/blocked");
    expect(inspection.tasks.map((task: Json) => task.state.kind)).toContain("blocked");
    const { alarm } = await edge.json("sleeper", "blocked", "/alarm");
    expect(alarm).toBeNull(); // before: a heartbeat every 300 ms for ever, for work nothing can run
  });

  it("a sleeper whose kind a deploy removed gets one alarm at its `until`, not one after another", async () => {
    const { id } = await edge.json("sleeper", "removed", "/sleep?ms=200");
    let task: Json;
    for (let i = 0; i < 200 && task?.state.status !== "sleeping"; i++)
      task = (await edge.json("sleeper", "removed", `/task?id=${id}`)).task;
    const { id: objectId } = await edge.json("sleeper", "removed", "/alarm");
    await edge.restart({ bindings: { HEARTBEAT_MS: "300", WITHOUT_SLEEPER: "1" } });
    await edge.printed.until(() => alarms(objectId) >= 1, "the alarm at the sleep's end");
    // The alarm found the sleeper blocked and set no other; a while later there is still exactly one.
    await pause(1500);
    expect(alarms(objectId)).toBe(1);
    expect((await edge.json("sleeper", "removed", "/alarm")).alarm).toBeNull();
    expect((await edge.json("sleeper", "removed", `/task?id=${id}`)).task.state.status).toBe("sleeping");
  });
});

describe("npm run example:counter -- --edge", () => {
  it("S12: prints tick 1, tick 2, the seed's query after the abort (pending, n = 2, memos, restarts 1), then tick 3..5 and counted to 5", async () => {
    const printed: string[] = [];
    const tables: unknown[] = [];
    const log = vi.spyOn(console, "log").mockImplementation((line: unknown) => void printed.push(String(line)));
    const table = vi.spyOn(console, "table").mockImplementation((rows: unknown) => void tables.push(rows));
    try {
      const { runCounterOnEdge } = await import("../../examples/counter-edge.ts");
      await runCounterOnEdge();
    } finally {
      log.mockRestore();
      table.mockRestore();
    }
    expect(printed.filter((line) => /^(tick \d|counted to \d)$/.test(line))).toEqual([
      "tick 1",
      "tick 2",
      "tick 3",
      "tick 4",
      "tick 5",
      "counted to 5",
    ]);
    expect(printed.findIndex((line) => line.includes("aborted itself"))).toBeGreaterThan(printed.indexOf("tick 2"));
    expect(tables[0]).toEqual([
      { id: expect.any(Number), status: "pending", n: 2, memos: '{"printed-1":true,"printed-2":true}', restarts: 1 },
    ]);
    expect(tables[1]).toEqual([{ id: expect.any(Number), status: "terminal", n: null, memos: null, restarts: null }]);
  }, 60_000);
});
