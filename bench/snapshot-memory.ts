/**
 * What a snapshot's take (the object) and fetch (the tab) hold at their peak (decision 0079), measured in a fresh
 * Node process per side, over a baseline taken after the copy's rows (object) were made and collected:
 * `livePeakMB`, the most heap alive after a collection at any JSON.stringify/parse of 100,000 characters or more and
 * at the step's end (what the step holds at once); `peakRssMB`, the process's peak RSS grown (it also counts garbage
 * not yet collected, so it follows the collector more than the code); `keptHeapMB`, the heap still in use after the
 * step (what it keeps: the object's parts, the tab's rows). The tab reads each part's frame from a file as it asks
 * for it, as a socket delivers them one at a time. Run with the source tree to measure as its first argument, so the code before the
 * change can be measured the same way from an extracted copy:
 *
 * ```sh
 * tsx bench/snapshot-memory.ts            # this tree, both sides, 3 processes each
 * tsx bench/snapshot-memory.ts /tmp/old   # another tree (its src/follow/snapshot.ts)
 * ```
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const ROWS = 7_500;
const ROW_CHARS = 2_000; // 15 MB of entries: under a Durable Object's 16 MiB snapshot

type Side = "take" | "frames" | "fetch";

/** The copy's rows, each string flat as rows read from storage are (a padEnd string is a rope the first JSON.stringify flattens). */
function copy(): unknown {
  const flat = (text: string): string => JSON.parse(JSON.stringify(text)) as string;
  return {
    batch: {
      fence: { epoch: 1, position: 3 },
      nextId: ROWS + 10,
      rootConversationId: 1,
      tasks: [],
      conversations: [{ id: 1, createdAt: 1 }],
      entries: Array.from({ length: ROWS }, (_, i) => ({
        id: i + 2,
        conversationId: 1,
        kind: "pi.user",
        payload: { text: flat(`${i}:`.padEnd(ROW_CHARS, "x")) },
        at: i + 2,
      })),
      submissions: [],
      documents: [],
    },
    epochs: [{ epoch: 1, start: 1 }],
  };
}

/**
 * The most heap alive (after a collection) over `base` at any JSON.stringify or JSON.parse of 100,000 characters or
 * more (the moments the old code held a whole text: right after making it, and while parsing it) and at `sample()`.
 */
function livePeak(gc: () => void) {
  let base = 0;
  let most = 0;
  const sample = () => {
    gc();
    most = Math.max(most, process.memoryUsage().heapUsed - base);
  };
  const { stringify, parse } = JSON;
  JSON.stringify = ((...args: Parameters<typeof stringify>) => {
    const text = stringify(...args);
    if (text !== undefined && text.length >= 100_000) sample();
    return text;
  }) as typeof stringify;
  JSON.parse = ((...args: Parameters<typeof parse>) => {
    const value = parse(...args);
    if (args[0].length >= 100_000) sample();
    return value;
  }) as typeof parse;
  return {
    start: () => {
      gc();
      base = process.memoryUsage().heapUsed;
      most = 0;
    },
    sample,
    most: () => most,
  };
}

async function measure(root: string, side: Side, frames: string): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error("run with node --expose-gc");
  const live = livePeak(gc);
  const { SnapshotServer, fetchSnapshot } = await import(pathToFileURL(resolve(root, "src/follow/snapshot.ts")).href);
  const { BACKGROUND_CONTEXT } = await import(pathToFileURL(resolve(root, "src/base/context.ts")).href);
  const clock = { now: () => 0, setTimer: () => () => {} };
  const mb = (bytes: number) => Math.round(bytes / 1e5) / 10;
  if (side === "take" || side === "frames") {
    const snapshot = copy();
    // maxRowBytes set: the object's bounds (16 MiB); limits wide enough for one fetch.
    const storage = { label: "object", maxRowBytes: 2_000_000, readSnapshot: async () => snapshot };
    const server = new SnapshotServer(storage, clock, { burst: 10, totalBurst: 10, partBurst: 1_000, totalPartBurst: 1_000 });
    gc();
    const base = process.resourceUsage().maxRSS * 1024;
    const heapBefore = process.memoryUsage().heapUsed;
    if (side === "take") live.start();
    const first = await server.part(undefined, 0, "phone");
    if (side === "take") live.sample();
    gc();
    const peak = process.resourceUsage().maxRSS * 1024 - base;
    const kept = process.memoryUsage().heapUsed - heapBefore;
    if (side === "take") {
      console.log(JSON.stringify({ side, parts: first.count, livePeakMB: mb(live.most()), peakRssMB: mb(peak), keptHeapMB: mb(kept) }));
      return;
    }
    mkdirSync(frames, { recursive: true });
    for (let index = 0; index < first.count; index++)
      writeFileSync(join(frames, `${index}.json`), JSON.stringify(await server.part(first.id, index, "phone")));
    return;
  }
  // The tab alone: each part's frame read as it arrives (a socket delivers one at a time), nothing of the object's.
  gc();
  const base = process.resourceUsage().maxRSS * 1024;
  const heapBefore = process.memoryUsage().heapUsed;
  live.start();
  const link = {
    call: async (_t: string, _m: string, args: unknown[]) =>
      JSON.parse(readFileSync(join(frames, `${(args[2] as number | undefined) ?? 0}.json`), "utf8")),
  };
  const result = await fetchSnapshot(link, "phone", BACKGROUND_CONTEXT);
  live.sample();
  gc();
  const peak = process.resourceUsage().maxRSS * 1024 - base;
  const kept = process.memoryUsage().heapUsed - heapBefore;
  console.log(
    JSON.stringify({ side, rows: result.batch.entries.length, livePeakMB: mb(live.most()), peakRssMB: mb(peak), keptHeapMB: mb(kept) }),
  );
}

const [root = resolve(import.meta.dirname, ".."), side, frames = ""] = process.argv.slice(2);
const child = (...args: string[]) =>
  execFileSync(process.execPath, ["--expose-gc", "--import", "tsx", import.meta.filename, root, ...args], { encoding: "utf8" });
if (side === "take" || side === "fetch" || side === "frames") await measure(root, side, frames);
else {
  for (let run = 0; run < 3; run++) process.stdout.write(child("take"));
  const dir = mkdtempSync(join(tmpdir(), "snapshot-frames-"));
  child("frames", dir);
  for (let run = 0; run < 3; run++) process.stdout.write(child("fetch", dir));
  rmSync(dir, { recursive: true });
}
