import { DatabaseCorrupt } from "../errors.ts";
import { depthExceeds, STORED_DEPTH_LIMIT } from "../limits.ts";
import type { DamagedRow } from "./storage.ts";

/** Why a stored record text is not a record of `table` (B4), or undefined when it parses. */
function problemOf(table: string, value: unknown): string | undefined {
  if (value === null) return "the record is null";
  if (typeof value !== "object" || Array.isArray(value)) return "the record is not an object";
  if (table === "tasks" && typeof (value as { state?: unknown }).state !== "object") return "the record has no state";
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
  for (const [id, text] of rows) {
    const parsed = parse(text);
    const problem = "problem" in parsed ? parsed.problem : problemOf(table, parsed.value);
    if (problem || "problem" in parsed) damaged.push({ table, id, problem: problem ?? "" });
    else out.push(parsed.value as T);
  }
  return out;
}
