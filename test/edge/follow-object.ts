/**
 * The follow tests' object (test/edge/follow.edge.test.ts): a harness object in follow mode, the seed's counter
 * installed (it prints `object: tick n` through PRINT). Callers are named by the `x-caller` header: `alice` may
 * do everything on a follow link, `mallory` only ask about the lease. The lease lasts 3 s, or 60 s for an object
 * whose name starts with `long-lease` (a case about something else than the lease, that a tab's renewal delayed
 * under load past 3 s must not end).
 *
 * - `/state`: the lease record, the copy's head and epochs, the seed's query, and the harness's recovery once
 *   this object holds the lease — read straight from `ctx.storage.sql`, also while it follows.
 * - `/arm?point=after-release`: the next release this instance records is its last act — every later write is
 *   refused and the object aborts itself a moment later (so the release is durable, the takeover never started).
 * - `charge`: a server tool; each run adds a row to `charges`.
 * - `/listeners`: how many listeners the object's hosts hold for pages (its copy's and its own).
 * - `/abort`: `ctx.abort()` now. `/documents`: the keys and sizes of the documents of scope `large`.
 * - `/instance`: a name of this instance (a new one after an eviction).
 * - `/hold-alarms`: this instance's alarms do nothing from now on, so an instance that handed the lease back stays in
 *   its switch (decision 0139) until `/abort` ends it, as its alarm would.
 */
import { counterTask, SEED_QUERY } from "../../examples/counter-task.ts";
import { type DurableObjectState, type DurableObjectStorage, HarnessObject } from "../../src/cloudflare/index.ts";
import { createRegistry, defineExtension, defineTool, type Harness } from "../../src/index.ts";
import { SQL } from "../../src/storage/sqlite/schema.ts";
import { writeFileTool } from "./write-file-tool.ts";

interface Env {
  PRINT: { fetch(url: string, init: RequestInit): Promise<Response> };
  /** The follow option `keepLog` (decision 0047), when a test's workerd binds it. */
  FOLLOW_KEEP_LOG?: string;
}

/** `ctx.storage` that dies right after the write recording a release, when armed. */
function armedStorage(ctx: DurableObjectState, plan: { armed: boolean; dead: boolean }): DurableObjectStorage {
  const inner = ctx.storage;
  const refuse = () => {
    throw new Error("test: this instance crashed after recording the release; nothing reaches its storage any more");
  };
  const sql = {
    exec(query: string, ...bindings: unknown[]) {
      if (plan.dead && !/^\s*SELECT/i.test(query)) refuse();
      const cursor = inner.sql.exec(query, ...bindings);
      if (plan.armed && query.includes("pi_follow_lease") && String(bindings[0] ?? "").includes('"releasedAt"')) {
        plan.dead = true;
        setTimeout(() => ctx.abort("test: crashed after recording the release"), 100);
      }
      return cursor;
    },
    get databaseSize() {
      return inner.sql.databaseSize;
    },
  };
  return {
    sql,
    transactionSync: (body) => (plan.dead ? refuse() : inner.transactionSync(body)),
    getAlarm: () => inner.getAlarm(),
    setAlarm: (at) => inner.setAlarm(at),
    deleteAlarm: () => inner.deleteAlarm(),
  };
}

/** A server tool (decision 0036): each run is a row of `charges`, so a test sees how often it ran. */
function chargeTool(storage: DurableObjectStorage) {
  return defineTool<{ amount: number }>({
    name: "charge",
    description: "Charge the card on file",
    parameters: { type: "object", properties: { amount: { type: "number" } }, required: ["amount"] },
    runsOn: "server",
    execute({ amount }) {
      storage.sql.exec("CREATE TABLE IF NOT EXISTS charges (amount REAL)");
      storage.sql.exec("INSERT INTO charges (amount) VALUES (?)", amount);
      const runs = storage.sql.exec("SELECT count(*) AS n FROM charges").toArray()[0]!.n;
      return `charged ${amount} (run ${String(runs)})`;
    },
  });
}

export class FollowObject extends HarnessObject<Env> {
  readonly #plan: { armed: boolean; dead: boolean };
  readonly #instance = crypto.randomUUID();
  #holdAlarms = false;

  constructor(ctx: DurableObjectState, env: Env) {
    const plan = { armed: false, dead: false };
    const print = (line: string) => env.PRINT.fetch("http://print/", { method: "POST", body: `object: ${line}` }).then(() => {});
    super(ctx, env, () => ({
      registry: createRegistry().install(
        defineExtension({
          name: "example",
          tasks: [counterTask(print)],
          tools: [chargeTool(ctx.storage), writeFileTool((path) => print(`write ${path}`).then(() => `wrote ${path}`))],
        }),
      ),
      storage: armedStorage(ctx, plan),
      authenticate: (request) => request.headers.get("x-caller") ?? undefined,
      follow: {
        ttlMs: ctx.id.name?.startsWith("long-lease") ? 60_000 : 3_000,
        ...(env.FOLLOW_KEEP_LOG ? { keepLog: Number(env.FOLLOW_KEEP_LOG) } : {}),
        authorize: (caller, action, place) => {
          // "blinker": the app's permission store is down for this caller (decision 0117, later: onAuthorizeError).
          if (caller === "blinker") throw new Error("the permission store at db.internal is down");
          return caller === "alice" || (caller === "mallory" && action.startsWith("lease.")) || (caller === "bob" && place === "bob-phone");
        },
      },
      onAuthorizeError: (error, { caller, action, door }) =>
        void print(`authorize failed ${door} ${action} ${JSON.stringify(caller)} ${(error as Error).message}`),
    }));
    this.#plan = plan;
  }

  override async alarm(): Promise<void> {
    if (!this.#holdAlarms) await super.alarm();
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/abort") {
      this.ctx.abort("test: abort");
      return new Response("aborted");
    }
    if (url.pathname === "/instance") return Response.json({ instance: this.#instance });
    if (url.pathname === "/hold-alarms") {
      this.#holdAlarms = true;
      return Response.json({ holding: true });
    }
    if (url.pathname === "/listeners") return Response.json({ listeners: this.listenerCount() });
    if (url.pathname === "/arm") {
      this.#plan.armed = true;
      return Response.json({ armed: true });
    }
    if (url.pathname === "/documents") {
      const rows = this.ctx.storage.sql
        .exec("SELECT key, length(record) AS bytes FROM documents WHERE scope = 'large' ORDER BY key")
        .toArray();
      return Response.json({ rows });
    }
    if (url.pathname === "/state") {
      const sql = this.ctx.storage.sql;
      const rows = (query: string) => {
        try {
          return sql.exec(query).toArray();
        } catch {
          return [];
        }
      };
      const lease = rows("SELECT record FROM pi_follow_lease")[0];
      const head = rows(SQL.logHead)[0];
      const harness = await Promise.race([this.ready, Promise.resolve(undefined as Harness | undefined)]);
      return Response.json({
        lease: lease ? JSON.parse(String(lease.record)) : undefined,
        head: head?.position ? Number(head.position) : 0,
        epochs: rows("SELECT epoch, start FROM pi_durable_epochs ORDER BY epoch"),
        tail: rows("SELECT min(position) AS first, count(*) AS count FROM pi_durable_log")[0],
        tasks: rows(SEED_QUERY),
        recovery: harness?.recovery,
        holding: harness !== undefined && !harness.readOnly,
        alarm: await this.ctx.storage.getAlarm(),
      });
    }
    return super.fetch(request);
  }
}
