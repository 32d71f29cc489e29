import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Json } from "../src/base/json.ts";
import { sha256Text, TextSha256 } from "../src/base/sha256.ts";
import { ConnectionLost, FollowMessageRefused, FollowVersionMismatch } from "../src/errors.ts";
import { MAX_FOLLOW_MESSAGE_BYTES } from "../src/follow/chunks.ts";
import { fetchSnapshot, rebuildFromObject, SnapshotServer } from "../src/follow/snapshot.ts";
import { jsonStringBytes, PartCutter, SnapshotReader, snapshotLines } from "../src/follow/snapshot-text.ts";
import { answerHello } from "../src/follow/wire-version.ts";
import { MemoryStorage } from "../src/index.ts";
import { utf8Length } from "../src/limits.ts";
import type { EntryRecord, Snapshot } from "../src/storage/records.ts";
import type { Storage } from "../src/storage/storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { none, partsOf, servingLink } from "./snapshot-support.ts";
import { ctx } from "./support.ts";

// Decision 0079 (issue 27 item 4): a snapshot's parts are made row by row on the object and read row by row on the
// tab; neither end holds the snapshot's whole JSON text (decision 0058's bound was the whole text at both ends).

const entry = (id: number, text: string): EntryRecord => ({ id, conversationId: 1, kind: "pi.user", payload: { text }, at: id });

/** A copy at 1/`position` of `rows` entries of `size` characters each, and one document of `document` characters. */
function copyOf(rows: number, size: number, document = 0, position = 3): Snapshot {
  return {
    batch: {
      ...none(),
      fence: { epoch: 1, position },
      nextId: rows + 10,
      rootConversationId: 1,
      conversations: [{ id: 1, createdAt: 1 }],
      entries: Array.from({ length: rows }, (_, i) => entry(i + 2, `${i}:`.padEnd(size, "x"))),
      documents: document > 0 ? [{ scope: "app", key: "big", value: "d".repeat(document) }] : [],
    },
    epochs: [{ epoch: 1, start: 1 }],
  };
}

/** An object's snapshot server over a copy that always reads `snapshot`, and a link to it through JSON frames. */
function objectServing(snapshot: Snapshot) {
  const storage = { label: "object", readSnapshot: async () => snapshot } as unknown as Storage;
  const server = new SnapshotServer(storage, createManualClock(0), {
    burst: 1_000,
    totalBurst: 1_000,
    partBurst: 10_000,
    totalPartBurst: 10_000,
  });
  const asked: number[] = [];
  const link = {
    call: async (_topic: string, _method: string, args: Json[]) => {
      asked.push((args[2] as number | undefined) ?? 0);
      const part = await server.part(args[1] as string | undefined, args[2] as number | undefined, args[0] as string);
      return JSON.parse(JSON.stringify(part)) as Json; // as a frame crosses the socket
    },
  };
  return { link, asked };
}

/** The longest string JSON.stringify made and JSON.parse read while `work` ran. */
async function longestJsonString(work: () => Promise<unknown>): Promise<number> {
  let longest = 0;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  vi.spyOn(JSON, "stringify").mockImplementation((...args: Parameters<typeof stringify>) => {
    const text = stringify(...args);
    longest = Math.max(longest, text?.length ?? 0);
    return text;
  });
  vi.spyOn(JSON, "parse").mockImplementation((...args: Parameters<typeof parse>) => {
    longest = Math.max(longest, args[0].length);
    return parse(...args);
  });
  try {
    await work();
  } finally {
    vi.restoreAllMocks();
  }
  return longest;
}

afterEach(() => vi.restoreAllMocks());

describe("snapshot parts made and read row by row (decision 0079)", () => {
  it("0079: a 12 MB copy's take and fetch never make or parse a string longer than one part (before: the whole 12 MB text at both ends)", async () => {
    const snapshot = copyOf(6_000, 2_000);
    const { link } = objectServing(snapshot);
    let fetched: Snapshot | undefined;
    const longest = await longestJsonString(async () => (fetched = await fetchSnapshot(link, "phone", ctx)));
    expect(fetched).toEqual(snapshot);
    const whole = [...snapshotLines(snapshot)].join("").length;
    expect(whole).toBeGreaterThan(12_000_000);
    expect(longest).toBeLessThanOrEqual(MAX_FOLLOW_MESSAGE_BYTES);
  });

  it("0079: a row larger than a part crosses parts whole: the largest string either end parses is that row's record, not the snapshot", async () => {
    const snapshot = copyOf(2_000, 1_000, 3_000_000);
    const { link, asked } = objectServing(snapshot);
    let fetched: Snapshot | undefined;
    const longest = await longestJsonString(async () => (fetched = await fetchSnapshot(link, "phone", ctx)));
    expect(fetched).toEqual(snapshot);
    expect(asked.length).toBeGreaterThan(5);
    expect(longest).toBeLessThan(3_100_000);
  });

  it("0079 property: any snapshot cut with any budget reads back the same, whatever the pieces the text arrives in; every part fits the budget; the digest is the joined text's", () => {
    const text = fc.string({ unit: "binary", maxLength: 300 });
    fc.assert(
      fc.property(
        fc.array(text, { maxLength: 12 }),
        fc.array(fc.tuple(fc.string({ maxLength: 8 }), fc.oneof(text, fc.integer(), fc.boolean())), { maxLength: 6 }),
        fc.integer({ min: 40, max: 600 }),
        fc.array(fc.nat(), { maxLength: 20 }),
        (texts, documents, budget, cuts) => {
          const snapshot = copyOf(0, 0);
          snapshot.batch.entries = texts.map((t, i) => entry(i + 2, t));
          snapshot.batch.documents = documents.map(([key, value], i) => ({ scope: `s${i}`, key, value }));
          snapshot.batch.nextId = texts.length + 10;
          const cutter = new PartCutter(budget, 1 << 20);
          for (const line of snapshotLines(snapshot)) cutter.add(line);
          const { parts, digest } = cutter.finish();
          const joined = parts.join("");
          expect(joined).toBe([...snapshotLines(snapshot)].join(""));
          expect(digest).toBe(sha256Text(joined));
          for (const part of parts) expect(utf8Length(JSON.stringify(part))).toBeLessThanOrEqual(budget);
          // The parts as cut, and the same text in other pieces (a reader does not care where parts end).
          const reader = new SnapshotReader();
          for (const part of parts) reader.add(part);
          expect(reader.finish(snapshot.batch.fence, digest)).toEqual(snapshot);
          const again = new SnapshotReader();
          const points = [...new Set(cuts.map((cut) => cut % (joined.length + 1)))].sort((a, b) => a - b);
          let from = 0;
          for (const point of [...points, joined.length]) {
            again.add(joined.slice(from, point));
            from = point;
          }
          expect(again.finish(snapshot.batch.fence, digest)).toEqual(snapshot);
        },
      ),
      { numRuns: 200 },
    );
  });

  it("0079 property: jsonStringBytes counts the bytes JSON.stringify writes for any text, without its quotes", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 200 }), (text) => {
        expect(jsonStringBytes(text)).toBe(utf8Length(JSON.stringify(text)) - 2);
      }),
      { numRuns: 500 },
    );
    for (let code = 0; code < 0x80; code++) {
      const text = `a${String.fromCharCode(code)}\ud800`;
      expect(jsonStringBytes(text)).toBe(utf8Length(JSON.stringify(text)) - 2);
    }
  });

  it("0079 property: the incremental hash of any text in any pieces (surrogate pairs split included) is the whole's SHA-256", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 200 }), fc.array(fc.nat(), { maxLength: 10 }), (text, cuts) => {
        const hash = new TextSha256();
        const points = [...new Set(cuts.map((cut) => cut % (text.length + 1)))].sort((a, b) => a - b);
        let from = 0;
        for (const point of [...points, text.length]) {
          hash.update(text.slice(from, point));
          from = point;
        }
        expect(hash.hex()).toBe(sha256Text(text));
      }),
      { numRuns: 300 },
    );
  });

  it("0079 property: hostile records in any parts (garbage, deep nesting, a header holding rows, rows after the end, a wrong end, a record cut off) are refused as FollowMessageRefused and leave the tab's storage as it was", async () => {
    const tab = new MemoryStorage();
    await tab.apply({ ...none(), fence: { epoch: 1, position: 1 }, nextId: 5, conversations: [{ id: 1, createdAt: 1 }] });
    const image = await tab.exportImage();
    const snapshot = copyOf(4, 30);
    const lines = [...snapshotLines(snapshot)];
    const deep = (levels: number): Json => (levels === 0 ? 1 : [deep(levels - 1)]);
    const hostile = fc.oneof(
      fc.json().map((json) => `${json}\n`),
      fc.string({ maxLength: 40 }),
      fc.constant(`${JSON.stringify(["entries", deep(700)])}\n`),
      fc.constant(`${JSON.stringify({ batch: { ...snapshot.batch, entries: [] }, epochs: snapshot.epochs })}\n`),
      fc.constant(`${JSON.stringify(["end", 99])}\n`),
      fc.constant(`${JSON.stringify(["rows", entry(2, "a")])}\n`),
      fc.constant("\n"),
    );
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: lines.length }),
        hostile,
        fc.boolean(),
        fc.integer({ min: 30, max: 400 }),
        async (where, bad, replace, budget) => {
          const text = [...lines.slice(0, where), bad, ...lines.slice(replace ? where + 1 : where)].join("");
          const storage = MemoryStorage.fromImage(image);
          const outcome = await rebuildFromObject(
            { storage, link: servingLink(partsOf(text, snapshot.batch.fence, budget)), place: "tab", now: 7 },
            ctx,
          ).then(
            () => undefined,
            (error: unknown) => error,
          );
          if (outcome === undefined) {
            // Only the snapshot itself (a hostile record that happened to be the line it replaced) is taken.
            expect(await storage.readSnapshot!()).toEqual(snapshot);
            return;
          }
          refused++;
          expect(outcome).toBeInstanceOf(FollowMessageRefused);
          expect(await storage.exportImage()).toEqual(image);
        },
      ),
      { numRuns: 150 },
    );
    expect(refused).toBeGreaterThan(100);
  });

  it("0079: a rebuild interrupted at any part (the link lost) leaves the tab's storage as it was; the next rebuild takes the copy", async () => {
    const snapshot = copyOf(1_500, 2_000);
    const tab = new MemoryStorage();
    await tab.apply({ ...none(), fence: { epoch: 1, position: 1 }, nextId: 5, conversations: [{ id: 1, createdAt: 1 }] });
    const image = await tab.exportImage();
    const { link } = objectServing(snapshot);
    const count = ((await link.call("follow", "snapshot", ["tab"])) as { count: number }).count;
    expect(count).toBeGreaterThan(2);
    for (let lost = 0; lost < count; lost++) {
      const storage = MemoryStorage.fromImage(image);
      const failing = {
        call: async (topic: string, method: string, args: Json[]) => {
          if (((args[2] as number | undefined) ?? 0) === lost) throw new ConnectionLost();
          return link.call(topic, method, args);
        },
      };
      await expect(rebuildFromObject({ storage, link: failing, place: "tab", now: 7 }, ctx)).rejects.toBeInstanceOf(ConnectionLost);
      expect(await storage.exportImage()).toEqual(image);
      await rebuildFromObject({ storage, link, place: "tab", now: 7 }, ctx);
      expect(await storage.readSnapshot!()).toEqual(snapshot);
    }
  });

  it("0079: a tab of wire version 5 meets an object of 6 at its hello: FollowVersionMismatch telling it to reload (before: 5 was this release's, and its parser would refuse the records as JSON)", () => {
    expect(() => answerHello(5)).toThrow(FollowVersionMismatch);
    expect(() => answerHello(5)).toThrow(/reload the tab/);
  });
});
