/**
 * What a database holds, decided before anything is written, and the schema made ready for this version:
 *
 * - our marker (`pi_durable_meta`): ours, at its version (a newer one is refused; an older one gets the tables it
 *   lacks at a writable open: version 2 the log, version 3 the tail's slices and the forks);
 * - the marker of version 1 (`meta` with a `schema_version`) beside our tables: ours, migrated on a writable
 *   open (renamed to the new marker), read as it is on a read-only one;
 * - nothing at all, or — in a database shared with an app (`SqliteDatabase.shared`, a Durable Object's SQLite
 *   with the app's tables and its `_cf_KV`) — none of our tables: fresh, so the schema is created beside
 *   whatever else is there;
 * - anything else is not ours and is left unmodified: in a file of our own (the browser), other tables mean a
 *   foreign or damaged file; in a shared database, an app table that has one of our names.
 */
import { DatabaseCorrupt, SchemaTooNew } from "../../errors.ts";
import type { PinnedLease } from "../records.ts";
import type { SqliteDatabase } from "./database.ts";
import { DATA_TABLES, EPOCHS_TABLE, LOG_PARTS_TABLE, META_TABLE, SCHEMA, SCHEMA_VERSION, SQL } from "./schema.ts";

/** Version 1's marker table. */
const LEGACY_META = "meta";

/** Where this database's metadata is read (version 1's marker stays in place on a read-only open). */
export type MetaTable = typeof META_TABLE | typeof LEGACY_META;

/** What `prepareSchema` found: where the metadata is, and whether the fenced log's table exists. */
export interface PreparedSchema {
  meta: MetaTable;
  /** False only on a read-only open of a database older than version 3 (it has no log: nothing fenced wrote it). */
  log: boolean;
  /** Whether the log tail's slices and the forks' tables exist (not on a read-only open of a database before version 4). */
  parts: boolean;
}

/** Makes the schema ready on `db` (creating or migrating it when writable); says where its metadata is. */
export async function prepareSchema(db: SqliteDatabase, label: string): Promise<PreparedSchema> {
  const tables = new Set((await db.all(SQL.tableNames)).map((row) => String(row.name)));
  const ours = DATA_TABLES.filter((name) => tables.has(name));
  if (tables.has(META_TABLE)) {
    const version = await checkVersion(db, label, META_TABLE);
    checkTables(tables, label);
    if (version < SCHEMA_VERSION && !db.readOnly) await migrate(db);
    return { meta: META_TABLE, log: !db.readOnly || tables.has(EPOCHS_TABLE), parts: !db.readOnly || tables.has(LOG_PARTS_TABLE) };
  }
  const legacy = tables.has(LEGACY_META) && ours.length > 0 ? await legacyVersion(db) : undefined;
  if (legacy !== undefined) {
    await checkVersion(db, label, LEGACY_META);
    checkTables(tables, label);
    if (db.readOnly) return { meta: LEGACY_META, log: false, parts: false };
    await migrate(db, `ALTER TABLE ${LEGACY_META} RENAME TO ${META_TABLE}`);
    return { meta: META_TABLE, log: true, parts: true };
  }
  if (tables.size === 0 || (db.shared && ours.length === 0)) {
    if (db.readOnly) throw new DatabaseCorrupt(`${label} has no pi-durable database in it to open read-only.`);
    await db.transaction((tx) => {
      for (const statement of splitStatements(SCHEMA)) tx.run(statement);
      tx.run(SQL.writeMeta, "schema_version", String(SCHEMA_VERSION));
      tx.run(SQL.writeMeta, "next_id", "1");
    });
    return { meta: META_TABLE, log: true, parts: true };
  }
  if (db.shared) {
    throw new DatabaseCorrupt(
      `${label} holds tables named like pi-durable's (${ours.join(", ")}) without its marker table ${META_TABLE}: ` +
        "they are the app's. Rename the app's tables (pi-durable needs these names for its own). It was left unmodified.",
    );
  }
  const why = tables.has(LEGACY_META) ? "its meta table is another app's" : `it has no ${META_TABLE} table`;
  throw new DatabaseCorrupt(`${label} is a SQLite database but not a pi-durable one (${why}). It was left unmodified.`);
}

/**
 * Brings an older schema of ours to this version in one transaction: `first` (version 1's rename of its marker),
 * then every table and index this version has that the database lacks (version 3's log), then the version row.
 */
async function migrate(db: SqliteDatabase, first?: string): Promise<void> {
  await db.transaction((tx) => {
    if (first) tx.run(first);
    for (const statement of splitStatements(SCHEMA)) tx.run(statement);
    tx.run(SQL.writeMeta, "schema_version", String(SCHEMA_VERSION));
  });
}

/** The `schema_version` in version 1's `meta`, or undefined when that table is not ours. */
async function legacyVersion(db: SqliteDatabase): Promise<string | undefined> {
  try {
    return (await readMeta(db, LEGACY_META)).get("schema_version");
  } catch {
    return undefined; // not a key/value table: another app's
  }
}

async function checkVersion(db: SqliteDatabase, label: string, table: MetaTable): Promise<number> {
  let meta: Map<string, string>;
  try {
    meta = await readMeta(db, table);
  } catch (error) {
    throw new DatabaseCorrupt(`${label}: its ${table} table is damaged. It was left unmodified.`, { cause: error });
  }
  const version = Number(meta.get("schema_version"));
  if (!Number.isInteger(version)) throw new DatabaseCorrupt(`${label} has no valid schema version. It was left unmodified.`);
  if (version > SCHEMA_VERSION) throw new SchemaTooNew(version, SCHEMA_VERSION);
  return version;
}

function checkTables(tables: ReadonlySet<string>, label: string): void {
  const missing = DATA_TABLES.filter((name) => !tables.has(name));
  if (missing.length > 0) throw new DatabaseCorrupt(`${label} lacks the tables ${missing.join(", ")}. It was left unmodified.`);
}

/** The metadata rows of `table`. */
export async function readMeta(db: SqliteDatabase, table: MetaTable = META_TABLE): Promise<Map<string, string>> {
  const sql = table === META_TABLE ? SQL.readMeta : `SELECT key, value FROM ${LEGACY_META}`;
  return new Map((await db.all(sql)).map((row) => [String(row.key), String(row.value)]));
}

function splitStatements(sql: string): string[] {
  return sql
    .replace(/--[^\n]*/g, "")
    .split(";")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** The remembered pinned lease from its metadata row, or undefined when there is none (or it does not parse). */
export function pinnedLease(text: string | undefined): PinnedLease | undefined {
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text) as Partial<PinnedLease>;
    return typeof value.place === "string" && Number.isSafeInteger(value.epoch) ? { place: value.place, epoch: value.epoch! } : undefined;
  } catch {
    return undefined; // damaged: the place asks its arbiter, as without one
  }
}
