import { describe, expect, it } from "vitest";
import { FollowLink } from "../src/follow/link-client.ts";
import { OutgoingCalls } from "../src/follow/outgoing-calls.ts";
import { SnapshotServer } from "../src/follow/snapshot.ts";
import type { Storage } from "../src/storage/storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { copyAt } from "./snapshot-copy.ts";

// Decision 0078: the core draws the random part of its ids from a source it is given (as it reads time from the
// harness clock), not from globalThis.crypto. Before, FollowLink, OutgoingCalls and SnapshotServer each called
// crypto.randomUUID() themselves, and a test could neither choose nor predict their ids.

/** A deterministic id source: "seed-1", "seed-2", … */
function counted(): { next: () => string; drawn: string[] } {
  const drawn: string[] = [];
  return {
    drawn,
    next: () => {
      const id = `seed-${drawn.length + 1}`;
      drawn.push(id);
      return id;
    },
  };
}

describe("the core's ids come from the source it is given (decision 0078)", () => {
  it("0078: a follow link's hello and calls carry the injected source's id", () => {
    const source = counted();
    const frames: string[] = [];
    const link = new FollowLink({ clock: createManualClock(0), send: (frame) => frames.push(frame), newId: source.next });
    link.connected();
    void link.call("lease", "renew", ["tab", 1]).catch(() => {});
    expect(source.drawn).toEqual(["seed-1"]);
    expect(frames.map((frame) => (JSON.parse(frame) as { id: string }).id)).toEqual(["seed-1:hello:1"]);
  });

  it("0078: the object's calls of its tabs carry the injected source's id", () => {
    const source = counted();
    const calls = new OutgoingCalls(createManualClock(0), source.next);
    const frames: string[] = [];
    void calls.call("tab", (frame) => frames.push(frame), { topic: "forward", method: "submit", args: [] }).catch(() => {});
    void calls.call("tab", (frame) => frames.push(frame), { topic: "forward", method: "submit", args: [] }).catch(() => {});
    expect(frames.map((frame) => (JSON.parse(frame) as { id: string }).id)).toEqual(["seed-1:1", "seed-1:2"]);
  });

  it("0078: the object's snapshot ids carry the injected source's id", async () => {
    const source = counted();
    const storage = { label: "object", readSnapshot: async () => copyAt(3) } as unknown as Storage;
    const server = new SnapshotServer(storage, createManualClock(0), undefined, source.next);
    const first = await server.part(undefined, 0, "phone");
    const second = await server.part(undefined, 0, "laptop");
    expect([first.id, second.id]).toEqual(["seed-1:1", "seed-1:2"]);
  });

  it("0078 (a guard): without one given, two instances still draw different ids", () => {
    const frames: string[] = [];
    for (let i = 0; i < 2; i++) new FollowLink({ clock: createManualClock(0), send: (frame) => frames.push(frame) }).connected();
    const [a, b] = frames.map((frame) => (JSON.parse(frame) as { id: string }).id);
    expect(a).not.toEqual(b);
  });
});
