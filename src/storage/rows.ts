import { DatabaseCorrupt, InvalidInput } from "../errors.ts";
import { depthExceeds, STORED_DEPTH_LIMIT, utf8Length, utf8Slices } from "../limits.ts";
import type { DamagedRow } from "./storage.ts";

/** Why a stored record text is not a record of `table` (B4), or undefined when it parses. */
function problemOf(table: string, value: unknown): string | undefined {
  if (value === null) return "the record is null";
  if (typeof value !== "object" || Array.isArray(value)) return "the record is not an object";
  const state = (value as { state?: unknown }).state;
  // A null state too (typeof null is "object"): the load reads every live task's status before the session checks it.
  if (table === "tasks" && (typeof state !== "object" || state === null)) return "the record has no state";
  return undefined;
}

function parse(text: unknown): { value: unknown } | { problem: string } {
  const source = String(text);
  let value: unknown;
  try {
    value = JSON.parse(source);
  } catch {
    return { problem: "the record is not valid JSON" };
  }
  // Nothing the harness writes nests this deep (settings.limits.maxDepth is at most 512); such a row would
  // break the kernel's copies and SQLite's own JSON functions. Each level takes two characters, so only a
  // long row can be that deep and the walk is skipped for the rest.
  if (source.length > 2 * STORED_DEPTH_LIMIT && depthExceeds(value, STORED_DEPTH_LIMIT)) {
    return { problem: `the record is nested deeper than ${STORED_DEPTH_LIMIT} levels` };
  }
  return { value };
}

/** Parses one stored record; a damaged one is a `DatabaseCorrupt` that names the row, never a SyntaxError. */
export function parseStored<T>(label: string, table: string, id: number | string, text: unknown): T {
  const parsed = parse(text);
  const problem = "problem" in parsed ? parsed.problem : problemOf(table, parsed.value);
  if (problem) throw new DatabaseCorrupt(`${label}: ${table} row ${id} is damaged (${problem}). Nothing was changed.`);
  return (parsed as { value: T }).value;
}

/** Parses rows for a load: the sound ones in order, and the damaged ones listed instead of thrown. */
export function parseAll<T>(table: string, rows: Iterable<readonly [id: number | string, text: unknown]>, damaged: DamagedRow[]): T[] {
  const out: T[] = [];
  for (const [id, text] of rows) parseInto(table, id, text, out, damaged);
  return out;
}

/** Parses one row for a load into `out`, or lists it in `damaged` (what `parseAll` does for each row). */
export function parseInto<T>(table: string, id: number | string, text: unknown, out: T[], damaged: DamagedRow[]): void {
  const parsed = parse(text);
  const problem = "problem" in parsed ? parsed.problem : problemOf(table, parsed.value);
  if (problem || "problem" in parsed) damaged.push({ table, id, problem: problem ?? "" });
  else out.push(parsed.value as T);
}

/** What a row is called in a message, by its table. */
const ROW_NAMES: Record<string, string> = {
  tasks: "task",
  conversations: "conversation",
  entries: "entry",
  submissions: "submission",
  documents: "document",
};

/**
 * Refuses a row of `table` larger than `maxRowBytes` (undefined: rows are unlimited): its serialized `record`
 * as UTF-8 plus `columns`, the bytes of its other columns (ids, keys, status). Called on every row of a
 * batch before its transaction, so a refused batch writes nothing. Each value of a row is checked where it
 * enters the harness (`settings.limits.maxBytes`), but a row holds several (a task's input, checkpoint, memos
 * and outcome): together they may be more than a Durable Object's row holds (2 MB), and this refusal is then
 * the commit's own, an `InvalidInput` (limit `maxRowBytes`) instead of an error from the SQL layer.
 */
export function refuseLargeRow(maxRowBytes: number | undefined, table: string, id: number | string, record: string, columns: number): void {
  // Three UTF-8 bytes at most per UTF-16 unit: most rows are decided without counting.
  if (maxRowBytes === undefined || record.length * 3 + columns <= maxRowBytes) return;
  const bytes = utf8Length(record) + columns;
  if (bytes <= maxRowBytes) return;
  const name = ROW_NAMES[table] ?? table;
  throw new InvalidInput(
    `The ${name} row ${id} would be ${bytes} bytes, over the ${maxRowBytes} one row of this storage holds (Storage.maxRowBytes); nothing was written. Its values were each within settings.limits.maxBytes but not together (a task's input, checkpoint, memos and outcome share one row): keep large data out of them (a file in the environment, a document of its own), or lower settings.limits.maxBytes.`,
    "maxRowBytes",
  );
}

/** Bytes of a row's columns other than its record: 8 per integer, UTF-8 for text. */
export function columnBytes(...values: ReadonlyArray<string | number | null | undefined>): number {
  let bytes = 0;
  for (const value of values) bytes += typeof value === "string" ? utf8Length(value) : value == null ? 0 : 8;
  return bytes;
}

/** What a slice of the log's tail leaves of a row for its other columns (position, epoch or part, SQLite's header). */
const LOG_ROW_COLUMNS = 64;

/**
 * A fenced transaction's JSON as the log's tail stores it (decision 0039): the text itself, one slice, where rows are
 * unlimited (`maxRowBytes` undefined; no list a step: decision 0131), else slices that each fit in a row, so no
 * transaction is too large for the tail — only a row of its own (a task, an entry) can be, and `refuseLargeRow`
 * refuses that.
 */
export function logSlices(text: string, maxRowBytes: number | undefined): string | string[] {
  return maxRowBytes === undefined ? text : utf8Slices(text, maxRowBytes - LOG_ROW_COLUMNS);
}
