/**
 * The coexistence test's object: an app that keeps its own table (`notes`) and its own KV (`ctx.storage.put`,
 * workerd's `_cf_KV` table) in the SQLite the harness uses too.
 *
 * - An object named `app-first-…` writes its table and KV in its constructor, before the harness's first open
 *   ever (the app existed before it adopted the harness).
 * - An object named `legacy-…` starts on a database in the shape of schema version 1 (the marker table named
 *   `meta`) holding a running counter at n = 2, as the code of that version left it.
 * - An object named `clash-…` has an app table named `tasks` (one of the harness's names) before its first
 *   open: the open fails, and every answer says why.
 * - Routes: `/note?text=` and `/kv?key=&value=` write as the app would (after the harness opened), `/app`
 *   reads back the app's rows, keys and the table list, `/start?to=` creates a counter, `/query` runs the
 *   seed's query. Lines print as `<name>: tick n`.
 */
import { counterTask, SEED_QUERY } from "../../examples/counter-task.ts";
import { type DurableObjectState, HarnessObject } from "../../src/cloudflare/index.ts";
import { BACKGROUND_CONTEXT as BACKGROUND, createRegistry, defineExtension } from "../../src/index.ts";
import { SCHEMA } from "../../src/storage/sqlite/schema.ts";

interface Env {
  PRINT: { fetch(url: string, init: RequestInit): Promise<Response> };
}

/** The KV half of `ctx.storage` the app uses (`put`, `get`, `list` of a SQLite-backed object). */
interface AppKv {
  put(key: string, value: unknown): Promise<void>;
  get(key: string): Promise<unknown>;
  list(): Promise<Map<string, unknown>>;
}

const V1_TASK = {
  id: 2,
  conversationId: 1,
  kind: "example.counter",
  version: 1,
  input: { to: 4 },
  background: false,
  abortRequested: false,
  state: { status: "running", checkpoint: { phase: "tick", n: 2 } },
  startedAt: 1000,
  memos: { "printed-1": true, "printed-2": true },
};

export class SharedObject extends HarnessObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    const name = ctx.id.name ?? ctx.id.toString();
    const sql = ctx.storage.sql;
    const kv = ctx.storage as unknown as AppKv;
    const empty = sql.exec("SELECT count(*) AS n FROM sqlite_schema WHERE name NOT LIKE '\\_cf\\_%' ESCAPE '\\'").toArray()[0]!.n === 0;
    if (name.startsWith("app-first-") && empty) {
      sql.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)");
      sql.exec("INSERT INTO notes (text) VALUES ('written before the harness')");
      void kv.put("greeting", { from: "the app", before: "the harness" });
    }
    if (name.startsWith("clash-") && empty) sql.exec("CREATE TABLE tasks (title TEXT)");
    if (name.startsWith("legacy-") && empty) {
      // Version 1's schema: today's tables, its marker still named `meta`.
      for (const statement of SCHEMA.replace(/--[^\n]*/g, "").split(";")) {
        if (statement.trim()) sql.exec(statement.replace("pi_durable_meta", "meta"));
      }
      for (const [key, value] of [
        ["schema_version", "1"],
        ["next_id", "1"],
        ["root_conversation", "1"],
      ]) {
        sql.exec("INSERT INTO meta (key, value) VALUES (?, ?)", key, value);
      }
      // The rows of test/fixtures/schema-v1-counter.sqlite (made by version 1's code), with `to: 4`.
      sql.exec(`INSERT INTO conversations (id, owner, record) VALUES (1, NULL, '{"id":1,"createdAt":1000}')`);
      sql.exec(
        `INSERT INTO documents (scope, key, record) VALUES ('pi.harness', 'lifecycle', '{"scope":"pi.harness","key":"lifecycle","value":{"state":"open"}}')`,
      );
      sql.exec(
        "INSERT INTO tasks (id, conversation_id, kind, status, record) VALUES (2, 1, 'example.counter', 'running', ?)",
        JSON.stringify(V1_TASK),
      );
    }
    const print = (line: string) => env.PRINT.fetch("http://print/", { method: "POST", body: `${name}: ${line}` }).then(() => {});
    super(ctx, env, () => ({
      registry: createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(print)] })),
      powers: ["query"], // the test reads the app's table through the harness's read-only query
    }));
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const kv = this.ctx.storage as unknown as AppKv;
    const sql = this.ctx.storage.sql;
    switch (url.pathname) {
      case "/note":
        sql.exec("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)");
        sql.exec("INSERT INTO notes (text) VALUES (?)", url.searchParams.get("text"));
        return Response.json({ ok: true });
      case "/kv":
        await kv.put(url.searchParams.get("key")!, url.searchParams.get("value"));
        return Response.json({ ok: true });
      case "/app": {
        const tables = sql.exec("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").toArray();
        const hasNotes = tables.some((row) => row.name === "notes");
        return Response.json({
          tables: tables.map((row) => row.name),
          notes: hasNotes
            ? sql
                .exec("SELECT text FROM notes ORDER BY id")
                .toArray()
                .map((row) => row.text)
            : [],
          kv: Object.fromEntries(await kv.list()),
        });
      }
      case "/start":
      case "/query":
      case "/wait":
        return this.#harnessRoute(url).catch((error: unknown) => this.errorResponse(error));
      default:
        return super.fetch(request); // the client API (a WebSocket, POST /rpc), outside serve(): it answers a failed open itself
    }
  }

  #harnessRoute(url: URL): Promise<Response> {
    return this.serve(async (harness) => {
      if (url.pathname === "/start") {
        const root = await harness.root(BACKGROUND);
        const id = await root.commit(
          (tx) =>
            tx.createTask(
              counterTask(() => {}),
              { to: Number(url.searchParams.get("to")) },
            ),
          BACKGROUND,
        );
        return Response.json({ id });
      }
      if (url.pathname === "/query") return Response.json({ rows: await harness.storage.query(SEED_QUERY) });
      if (url.pathname === "/wait") {
        return Response.json({ task: await harness.waitForTask(Number(url.searchParams.get("id")), BACKGROUND) });
      }
      return Response.json({ error: "no route" }, { status: 404 });
    });
  }
}
