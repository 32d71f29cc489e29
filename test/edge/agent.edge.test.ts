import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Edge, pause, startEdge } from "./support.ts";

let edge: Edge;
beforeAll(async () => {
  edge = await startEdge();
}, 120_000);
afterAll(() => edge?.dispose());

type Json = any;
const INTERRUPTED = (name: string) => `<harness>\n[error] Tool ${name} was interrupted and may have partially run\n</harness>`;
const lines = (name: string) =>
  edge.printed.lines.filter((line) => line.startsWith(`${name}: `)).map((line) => line.slice(name.length + 2));

/** Submits on the object; the object aborts itself at the cut (the tool, or the model request in flight). */
async function cutAndRevive(name: string) {
  const { submissionId, instance } = await edge.json("agent", name, "/submit?text=append%20hello");
  await edge.printed.until(() => lines(name).some((line) => line.startsWith("cut ")), "the cut");
  // Ask until a new instance answers: that start opened the harness and counted the restart.
  let state: Json;
  for (let i = 0; i < 200; i++) {
    const response = await edge.call("agent", name, `/state?submission=${submissionId}`);
    state = await response.json().catch(() => undefined);
    if (response.ok && state.instance !== instance) break;
    await pause(20);
  }
  const afterRestart = state;
  for (let i = 0; i < 300 && state.submission?.status !== "done" && state.submission?.status !== "unanswered"; i++) {
    await pause(20);
    state = await edge.json("agent", name, `/state?submission=${submissionId}`);
  }
  return { afterRestart, state };
}

const toolResults = (state: Json) => state.entries.filter((e: Json) => e.kind === "pi.tool-result").map((e: Json) => e.payload.message);
const assistants = (state: Json) =>
  state.entries
    .filter((e: Json) => e.kind === "pi.assistant")
    .map((e: Json) => [e.payload.message.stopReason, e.payload.message.content.map((c: Json) => c.text ?? "").join("")]);

describe("the seed's agent probes on a Durable Object with a real crash (ctx.abort)", () => {
  it("S8 tool probe, replay unsafe: the object dies during the tool; the tool is not rerun, the model gets the interruption", async () => {
    const { afterRestart, state } = await cutAndRevive("unsafe-probe");
    expect(afterRestart.rows.map((r: Json) => [r.kind, r.status, r.restarts, r.phase, r.replay])).toEqual([
      ["pi.generation", "waiting", null, "tools", null],
      ["pi.tool", "pending", 1, "execute", "unsafe"],
    ]);
    expect(state.submission.status).toBe("done");
    expect(assistants(state).at(-1)).toEqual(["stop", "noted"]);
    const [result] = toolResults(state);
    expect(result.isError).toBe(true);
    expect(result.content.map((c: Json) => c.text)).toEqual(["working\n", INTERRUPTED("append")]);
    expect(lines("unsafe-probe").filter((l) => l.startsWith("append"))).toEqual(['append "hello\\n"']); // ran once
    expect(lines("unsafe-probe")).toContain("report task_interrupted pi.tool interrupted");
    expect(lines("unsafe-probe")).toContain(`request with ${JSON.stringify(["working\n", INTERRUPTED("append")])}`);
  });

  it("S8 tool probe, replay safe: the tool runs again after the crash and its result is `appended`", async () => {
    const { afterRestart, state } = await cutAndRevive("safe-probe");
    expect(afterRestart.rows.map((r: Json) => [r.kind, r.status, r.restarts, r.phase, r.replay])).toEqual([
      ["pi.generation", "waiting", null, "tools", null],
      ["pi.tool", "pending", 1, "execute", "safe"],
    ]);
    expect(state.submission.status).toBe("done");
    expect(assistants(state).at(-1)).toEqual(["stop", "noted"]);
    const [result] = toolResults(state);
    expect(result.isError).toBe(false);
    expect(result.content.map((c: Json) => c.text)).toEqual(["appended"]);
    expect(lines("safe-probe").filter((l) => l.startsWith("append"))).toEqual(['append "hello\\n"', 'append "hello\\n"']);
    expect(lines("safe-probe").filter((l) => l.startsWith("report"))).toEqual([]);
  });

  it("S9 a generation cut mid-stream: the partial becomes an aborted entry, the retry waits its backoff, then the answer", async () => {
    const { afterRestart, state } = await cutAndRevive("gen-cut");
    const generation = afterRestart.tasks.find((t: Json) => t.kind === "pi.generation");
    expect(generation.state).toMatchObject({ status: "pending", checkpoint: { phase: "request", attempt: 1 } });
    expect(generation.restarts).toBe(1);
    expect(state.submission.status).toBe("done");
    expect(assistants(state)).toEqual([
      ["aborted", "Hel"],
      ["stop", "Hello!"],
    ]);
    // One request cut in flight, one after the backoff; the cut attempt was not resent at once.
    expect(lines("gen-cut").filter((l) => l.startsWith("request"))).toEqual(["request", "request"]);
  });
});
