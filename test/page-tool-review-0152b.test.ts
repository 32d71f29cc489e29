import { describe, expect, it } from "vitest";
import { providePageTools } from "../src/host/page-tools.ts";
import { scriptedHost, tick } from "./page-tool-claim-script.ts";

const ids = (sent: string[]) => sent.map((id) => id.slice(id.indexOf(":")));

/** A provision whose tool records each run's attempt and runs until its signal is aborted. */
async function provide(script: ReturnType<typeof scriptedHost>, options: { hang?: boolean } = {}) {
  const runs: number[] = [];
  const aborted: number[] = [];
  const stop = await providePageTools(script.host as never, "page-1", 1, {
    t: (_a, call) => {
      runs.push(call.attempt);
      if (!options.hang) return "ok";
      return new Promise((resolve) =>
        call.signal.addEventListener("abort", () => {
          aborted.push(call.attempt);
          resolve("aborted");
        }),
      );
    },
  });
  return { runs, aborted, stop };
}

/** :1 resent after a lost reply, the call released, :2 sent; :1 stored first at attempt 2 (its reply held), :2 refused. */
async function lateClaim(script: ReturnType<typeof scriptedHost>) {
  await script.releasedWhileResent();
  const late = script.pending.shift()?.store();
  script.pending.shift()?.ok(); // :2: PageCallTaken
  await tick();
  return late;
}

describe("a late claim is not run when its attempt is over (decision 0152's second review, B and C)", () => {
  it("S8: the list already shows a later attempt claimed by another page when :1's reply for attempt 2 comes: not run", async () => {
    const script = scriptedHost();
    const { runs, aborted, stop } = await provide(script, { hang: true });
    const late = await lateClaim(script);
    Object.assign(script.record, { status: "claimed", attempts: 3, claimId: "other:c:3" }); // 2 released, 3 claimed
    script.list();
    await tick();
    late?.();
    await tick();
    script.list();
    await tick();
    expect(runs).toEqual([]);
    expect(aborted).toEqual([]);
    expect(script.answers).toEqual([]);
    stop();
  });

  it("the call ended before :1's reply for attempt 2 came: not run", async () => {
    const script = scriptedHost();
    const { runs, stop } = await provide(script);
    const late = await lateClaim(script);
    script.ended();
    await tick();
    late?.();
    await tick();
    expect(runs).toEqual([]);
    stop();
  });

  it("attempt 2 released (the call waiting again) before :1's reply for it came: not run", async () => {
    const script = scriptedHost();
    const { runs, stop } = await provide(script, { hang: true });
    const late = await lateClaim(script);
    script.record.status = "waiting";
    script.list(); // :3 sent
    await tick();
    late?.();
    await tick();
    expect(runs).toEqual([]);
    expect(ids(script.sent)).toEqual([":c:1", ":c:1", ":c:2", ":c:3"]);
    stop();
  });

  it("a newer run of this provision holds attempt 3 when :1's reply for attempt 2 comes: that run goes on, :1 not run", async () => {
    const script = scriptedHost();
    const { runs, aborted, stop } = await provide(script, { hang: true });
    const late = await lateClaim(script);
    script.record.status = "waiting";
    script.list(); // :3 sent
    await tick();
    script.pending.shift()?.ok(); // :3 wins attempt 3 and runs
    await tick();
    late?.();
    await tick();
    expect(runs).toEqual([3]);
    expect(aborted).toEqual([]);
    stop();
  });
});

describe("a late claim whose reply is lost too is sent again (decision 0152's second review, A)", () => {
  it("S8: :1's resend wins attempt 2 and its reply is lost, :2 refused: :1 is claimed again under its id and run once", async () => {
    const script = scriptedHost();
    const runs: number[] = [];
    const stop = await providePageTools(script.host as never, "page-1", 1, {
      t: (_a, call) => {
        runs.push(call.attempt);
        return "ok";
      },
    });
    await script.releasedWhileResent();
    script.pending.shift()?.lose(); // the resend of :1 stored at attempt 2, its reply lost (a move)
    await tick();
    script.pending.shift()?.lose(); // :2 refused there, its reply lost too: sent again
    await tick();
    script.list(); // the next instance kept the claim
    await tick();
    script.pending.shift()?.ok(); // :2 again: PageCallTaken
    await tick();
    script.list();
    await tick();
    expect(ids(script.sent)).toEqual([":c:1", ":c:1", ":c:2", ":c:2", ":c:1"]);
    script.pending.shift()?.ok(); // :1 again: its claim back, at attempt 2
    await tick();
    for (let i = 0; i < 3; i++) {
      script.list();
      await tick();
    }
    expect(script.record).toMatchObject({ status: "claimed", attempts: 2, claimId: script.sent[0] });
    expect(runs).toEqual([2]);
    expect(script.answers).toEqual([script.sent[0]]);
    expect(script.pending).toEqual([]);
    stop();
  });

  it("a guard: the call claimed by another page at attempt 2 instead: :1 sent again once, refused, not run, nothing reported", async () => {
    const script = scriptedHost();
    const runs: number[] = [];
    const errors: unknown[] = [];
    const stop = await providePageTools(
      script.host as never,
      "page-1",
      1,
      {
        t: (_a, call) => {
          runs.push(call.attempt);
          return "ok";
        },
      },
      { onError: (error) => errors.push(error) },
    );
    await script.releasedWhileResent();
    Object.assign(script.record, { status: "claimed", attempts: 2, claimId: "other:c:2" }); // another page won 2
    script.pending.shift()?.lose(); // the resend of :1: refused there, its reply lost
    script.pending.shift()?.ok(); // :2: PageCallTaken
    await tick();
    for (let i = 0; i < 3; i++) {
      script.list();
      await tick();
      script.pending.shift()?.ok();
      await tick();
    }
    expect(ids(script.sent)).toEqual([":c:1", ":c:1", ":c:2", ":c:1"]);
    expect(runs).toEqual([]);
    expect(errors).toEqual([]);
    stop();
  });
});
