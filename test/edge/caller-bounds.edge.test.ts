/**
 * Decision 0148 in workerd: each page socket of a Durable Object is one caller, and holds at most
 * `callerLimits.maxSubscriptions` subscriptions (3 on the `limited` object). Past it a subscribe is answered
 * `TooManySubscriptions` over the real socket and nothing is held for it; another socket is its own caller; an
 * unsubscribe frees a place.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Edge, pause, startEdge } from "./support.ts";

let edge: Edge;
beforeAll(async () => {
  edge = await startEdge();
}, 120_000);
afterAll(() => edge?.dispose());

type Frame = { type: string; id: number; error?: { name: string; message: string } };

async function socket(name: string) {
  const response = await edge.call("limited", name, "/", { headers: { Upgrade: "websocket" } });
  const ws = (response as unknown as { webSocket?: any }).webSocket;
  ws.accept();
  const received: Frame[] = [];
  ws.addEventListener("message", (event: { data: string }) => void received.push(JSON.parse(event.data)));
  const answerTo = async (id: number) => {
    for (let i = 0; i < 500; i++) {
      const answer = received.find((frame) => frame.id === id && frame.type !== "event");
      if (answer) return answer;
      await pause(20);
    }
    throw new Error(`never answered: ${id}`);
  };
  const subscribe = (id: number, method: string) => {
    ws.send(JSON.stringify({ type: "subscribe", id, method, args: [] }));
    return answerTo(id);
  };
  return { subscribe, unsubscribe: (id: number) => ws.send(JSON.stringify({ type: "unsubscribe", id })), close: () => ws.close() };
}

describe("a Durable Object's page socket is one caller (decision 0148)", () => {
  it("0148: the fourth subscribe of a socket is TooManySubscriptions over the wire; another socket subscribes as usual; an unsubscribe frees a place", async () => {
    const page = await socket("bounds");
    expect(await page.subscribe(1, "onStatus")).toMatchObject({ type: "result" });
    expect(await page.subscribe(2, "onReport")).toMatchObject({ type: "result" });
    expect(await page.subscribe(3, "watchTasks")).toMatchObject({ type: "result" });
    const refused = await page.subscribe(4, "watchTasks");
    expect(refused).toMatchObject({ type: "error", error: { name: "TooManySubscriptions" } });
    expect(refused.error?.message).toMatch(/holds 3 subscriptions/);
    const other = await socket("bounds");
    for (const [id, method] of [
      [1, "onStatus"],
      [2, "onReport"],
      [3, "watchTasks"],
    ] as const)
      expect(await other.subscribe(id, method)).toMatchObject({ type: "result" });
    page.unsubscribe(3);
    expect(await page.subscribe(5, "watchTasks")).toMatchObject({ type: "result" });
    page.close();
    other.close();
  }, 60_000);
});
