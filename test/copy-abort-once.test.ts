import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { copyWrites } from "../src/follow/copy-writes.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { answerHelloCall, errorShape } from "../src/follow/object-door.ts";
import { switchRefusal } from "../src/follow/switch-answers.ts";
import { encodeFollowMessage, parseFollowMessage } from "../src/follow/wire.ts";
import { type AnyTool, HarnessClosed, NotReady, type Storage } from "../src/index.ts";
import { ScriptedModels, type Step } from "./agent-support.ts";
import { agentOptions, openCopyWorld } from "./copy-world-support.ts";
import { ctx, flush, memoryBackend, runUntil, wire } from "./support.ts";

async function world(storage: () => Promise<Storage>, steps: Step[], tools: AnyTool[] = []) {
  const models = new ScriptedModels(steps);
  const opened = await openCopyWorld({ tab: await storage(), copy: await storage() }, agentOptions(models, tools));
  const root = await opened.tab.root(ctx, { agent: { model: "faux/faux-1" } });
  await opened.caughtUp();
  return { ...opened, models, root };
}

describe("one press of stop through the object ends the runs going when it lands, never a later one (review of 0135, H1)", () => {
  it("S8/S12: an abort the handed-back instance answers NotReady is not sent again under a new id: a run started since is not stopped", async () => {
    const opened = await world(memoryBackend.create, [{ hang: "thinking" }, { hang: "thinking" }]);
    const { root, clock } = opened;
    const carried = wire(clock);
    const calls: Array<{ id: string; method: string; args: Json[] }> = [];
    const link: FollowLink = new FollowLink({
      clock,
      send: (frame) =>
        carried(() => {
          const parsed = parseFollowMessage(frame, "tab");
          if (!("message" in parsed) || parsed.message.type !== "call") return;
          const { id, topic, method, args } = parsed.message;
          if (topic === "wire") return carried(() => link.receive(encodeFollowMessage(answerHelloCall(id, args))));
          calls.push({ id, method, args });
        }),
    });
    link.connected();
    const answer = (id: string, result: { value: Json } | { error: unknown }) =>
      carried(() =>
        link.receive(
          encodeFollowMessage(
            "value" in result ? { type: "answer", id, value: result.value } : { type: "answer", id, error: errorShape(result.error) },
          ),
        ),
      );
    const nextInstance = copyWrites(() => opened.copy.service); // the object's next instance: the real copy handler
    const one = await root.submit({ type: "input", content: "one", requestId: "one" }, ctx);
    await runUntil(clock, () => opened.models.hanging === 1);
    await opened.caughtUp();
    // The device's page presses stop once.
    const outcome: { error?: unknown; value?: Json; settled: number } = { settled: 0 };
    link.call("copy", "abortConversation", [root.id]).then(
      (value) => Object.assign(outcome, { value, settled: outcome.settled + 1 }),
      (error: unknown) => Object.assign(outcome, { error, settled: outcome.settled + 1 }),
    );
    await runUntil(clock, () => calls.length >= 1);
    const x = calls[0]!;
    // The handed-back instance answers X NotReady (switchRefusal of its closed host's HarnessClosed) ...
    answer(x.id, { error: switchRefusal(new HarnessClosed(), true, "call again, same key") });
    // ... while X's same-id resend (sent before NotReady arrived) reached the next instance, which makes it.
    let xDone = false;
    void nextInstance("abortConversation", x.args, "device").then((value) => {
      xDone = true;
      answer(x.id, { value });
    });
    await runUntil(clock, () => xDone && outcome.settled > 0);
    expect(await one.wait(ctx)).toMatchObject({ status: "unanswered", reason: "aborted" });
    // The page is told NotReady (retryable: pressing stop again is the page's choice), once.
    expect(outcome.error).toBeInstanceOf(NotReady);
    // A new run starts at the holder (its own page, or another device) after the device's stop.
    const two = await root.submit({ type: "input", content: "two", requestId: "two" }, ctx);
    let twoEnded = false;
    two.wait(ctx).then(
      () => (twoEnded = true),
      () => (twoEnded = true),
    );
    await runUntil(clock, () => opened.models.hanging === 1);
    await opened.caughtUp();
    // Before: at the link's next resend the abort went again under a new id, and the object stopped run two.
    for (let pass = 0; pass < 20; pass++) {
      clock.advance(2_000);
      await flush(2);
    }
    expect(calls.map((call) => call.id)).toEqual([x.id]);
    expect(link.stats.notReadyRetries).toBe(0);
    expect(outcome.settled).toBe(1);
    expect(opened.models.hanging).toBe(1);
    expect(twoEnded).toBe(false); // run two goes on: only the user's own press stops it
    link.close();
    await opened.tab.close(ctx);
  });
});
