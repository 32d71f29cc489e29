/**
 * What a snapshot's take (the object) and rebuild (the tab) hold at their peak (decisions 0079, 0084), measured in a
 * fresh Node process per side, each over a SQLite copy in memory (the object's opened from an image written once, so
 * its rows were never made in the process that takes it), over a baseline taken after it was opened: `livePeakMB`,
 * the most heap alive after a collection at any JSON.stringify/parse of 100,000 characters or more, while the object
 * reads and cuts its copy (after a whole read; every 500 records added to the parts), before the tab asks for each
 * part, and at the step's end; `peakRssMB`, the process's peak RSS grown (it also counts garbage not
 * yet collected and the WASM heap the in-memory database grows, so it follows the collector and SQLite more than the
 * code); `keptHeapMB`, the heap still in use after the step (the object's parts). Load-independent counts beside them:
 * on the object `rowsParsed` (values JSON.parse made during the take) and on the tab `mostRowsAtOnce` (the most rows
 * handed to its storage at once: a whole rebuild's, or one staged part's), and at both `longestJson` (the longest
 * string JSON.stringify made or JSON.parse read). The tab reads each part's frame from a file as it asks for it, as a
 * socket delivers them one at a time. Run with the source tree to measure as its first argument, so the code before
 * the change can be measured the same way from an extracted copy:
 *
 * ```sh
 * tsx bench/snapshot-memory.ts            # this tree, both sides, 3 processes each
 * tsx bench/snapshot-memory.ts /tmp/old   # another tree (its src/follow/snapshot.ts)
 * ```
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const ROWS = 7_500;
const ROW_CHARS = 2_000; // 15 MB of entries: under a Durable Object's 16 MiB snapshot

type Side = "image" | "take" | "frames" | "rebuild";

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

/** The longest string JSON.stringify made or JSON.parse read, and how many values JSON.parse made, from now on. */
function jsonCounts() {
  let longest = 0;
  let parsed = 0;
  const { stringify, parse } = JSON;
  const outer = { stringify: JSON.stringify, parse: JSON.parse };
  JSON.stringify = ((...args: Parameters<typeof stringify>) => {
    const text = outer.stringify(...args);
    longest = Math.max(longest, text?.length ?? 0);
    return text;
  }) as typeof stringify;
  JSON.parse = ((...args: Parameters<typeof parse>) => {
    parsed++;
    longest = Math.max(longest, args[0].length);
    return outer.parse(...args);
  }) as typeof parse;
  return { longest: () => longest, parsed: () => parsed };
}

type Row = unknown;
interface SqliteCopy {
  rebuild(snapshot: unknown): Promise<void>;
  readSnapshot(): Promise<unknown>;
  readSnapshotRows?(head: (head: unknown) => void, row: (list: string, record: string) => void): Promise<boolean>;
  stageRebuild?(): Promise<{ add(rows: Record<string, Row[]>): Promise<void> }>;
}

async function measure(root: string, side: Side, dir: string): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error("run with node --expose-gc");
  const live = livePeak(gc);
  const load = (path: string) => import(pathToFileURL(resolve(root, path)).href);
  const { SnapshotServer, rebuildFromObject } = await load("src/follow/snapshot.ts");
  const { BACKGROUND_CONTEXT } = await load("src/base/context.ts");
  const { openSqliteStorage } = await load("src/storage/sqlite/open-storage.ts");
  const clock = { now: () => 0, setTimer: () => () => {} };
  const mb = (bytes: number) => Math.round(bytes / 1e5) / 10;
  if (side === "image") {
    // The object's copy, written once into a SQLite image the take's processes open (its rows never made there).
    const storage: SqliteCopy & { exportImage(): Promise<Uint8Array> } = await openSqliteStorage({ vfs: "memory" });
    await storage.rebuild(copy());
    writeFileSync(join(dir, "copy.sqlite"), await storage.exportImage());
    return;
  }
  if (side === "take" || side === "frames") {
    // The object's SQLite copy (in memory, from the image): its take reads it as the object reads its own.
    const storage: SqliteCopy = await openSqliteStorage({ vfs: "memory", image: new Uint8Array(readFileSync(join(dir, "copy.sqlite"))) });
    // Sampled while the take reads and cuts: after a whole read, and every 500 records added to the parts.
    const readWhole = storage.readSnapshot.bind(storage);
    storage.readSnapshot = async () => {
      const read = await readWhole();
      live.sample();
      return read;
    };
    const { PartCutter } = await load("src/follow/snapshot-text.ts");
    const add = PartCutter.prototype.add;
    let added = 0;
    PartCutter.prototype.add = function (this: unknown, line: string) {
      add.call(this, line);
      if (++added % 500 === 0) live.sample();
    };
    const server = new SnapshotServer(storage, clock, { burst: 10, totalBurst: 10, partBurst: 1_000, totalPartBurst: 1_000 });
    gc();
    const base = process.resourceUsage().maxRSS * 1024;
    const heapBefore = process.memoryUsage().heapUsed;
    const json = jsonCounts();
    if (side === "take") live.start();
    const first = await server.part(undefined, 0, "phone");
    if (side === "take") live.sample();
    gc();
    const peak = process.resourceUsage().maxRSS * 1024 - base;
    const kept = process.memoryUsage().heapUsed - heapBefore;
    if (side === "take") {
      const counts = { rowsParsed: json.parsed(), longestJson: json.longest() };
      console.log(
        JSON.stringify({ side, parts: first.count, ...counts, livePeakMB: mb(live.most()), peakRssMB: mb(peak), keptHeapMB: mb(kept) }),
      );
      return;
    }
    for (let index = 0; index < first.count; index++)
      writeFileSync(join(dir, `${index}.json`), JSON.stringify(await server.part(first.id, index, "phone")));
    return;
  }
  // The tab alone: each part's frame read as it arrives (a socket delivers one at a time), nothing of the object's,
  // and the rebuild of its SQLite copy (in memory) from them.
  const tab: SqliteCopy = await openSqliteStorage({ vfs: "memory" });
  let most = 0;
  const rowsOf = (rows: Record<string, unknown>) =>
    Object.values(rows).reduce<number>((sum, list) => sum + (Array.isArray(list) ? list.length : 0), 0);
  const rebuild = tab.rebuild.bind(tab);
  tab.rebuild = async (snapshot) => {
    most = Math.max(most, rowsOf((snapshot as { batch: Record<string, unknown> }).batch));
    await rebuild(snapshot);
  };
  const stageRebuild = tab.stageRebuild?.bind(tab);
  if (stageRebuild)
    tab.stageRebuild = async () => {
      const stage = await stageRebuild();
      return {
        ...stage,
        add: async (rows: Record<string, Row[]>) => {
          most = Math.max(most, rowsOf(rows));
          await stage.add(rows);
        },
      };
    };
  gc();
  const base = process.resourceUsage().maxRSS * 1024;
  const heapBefore = process.memoryUsage().heapUsed;
  const json = jsonCounts();
  live.start();
  let parts = 0;
  const link = {
    call: async (_t: string, _m: string, args: unknown[]) => {
      live.sample(); // what the tab holds between parts
      parts++;
      return JSON.parse(readFileSync(join(dir, `${(args[2] as number | undefined) ?? 0}.json`), "utf8"));
    },
  };
  await rebuildFromObject({ storage: tab, link, place: "phone", now: 0 }, BACKGROUND_CONTEXT);
  live.sample();
  gc();
  const peak = process.resourceUsage().maxRSS * 1024 - base;
  const kept = process.memoryUsage().heapUsed - heapBefore;
  const counts = { mostRowsAtOnce: most, longestJson: json.longest() };
  console.log(JSON.stringify({ side, parts, ...counts, livePeakMB: mb(live.most()), peakRssMB: mb(peak), keptHeapMB: mb(kept) }));
}

const [root = resolve(import.meta.dirname, ".."), side, dir = ""] = process.argv.slice(2);
const child = (...args: string[]) =>
  execFileSync(process.execPath, ["--expose-gc", "--import", "tsx", import.meta.filename, root, ...args], { encoding: "utf8" });
if (side === "image" || side === "take" || side === "rebuild" || side === "frames") await measure(root, side, dir);
else {
  const files = mkdtempSync(join(tmpdir(), "snapshot-memory-"));
  child("image", files);
  for (let run = 0; run < 3; run++) process.stdout.write(child("take", files));
  child("frames", files);
  for (let run = 0; run < 3; run++) process.stdout.write(child("rebuild", files));
  rmSync(files, { recursive: true });
}
