/**
 * A harness object's follow mode (docs/decisions/0031): the object is the lease's arbiter and the copy of its
 * tab's log; it takes the lease over at the tab's release, or at the lease's expiry watched by the object's alarm
 * (an evicted object has no timers). The follow link is a WebSocket of its own (`/follow`, the hibernation API,
 * tagged `follow`), every frame through `follow.authorize`.
 *
 * - The `LeaseBook`'s record lives in the object's SQLite (`pi_follow_lease`, one row), read and written with
 *   `ctx.storage.sql` synchronously: each call reads, decides and saves without yielding, and the object's
 *   output gate sends no answer before the write is durable.
 */
import { systemClock } from "../base/clock.ts";
import type { Json } from "../base/json.ts";
import { InvalidRequest } from "../errors.ts";
import { DEFAULT_LEASE_TTL_MS, LeaseBook, type LeaseRecord, randomFirstEpoch } from "../follow/arbiter.ts";
import type { AnswerStore, FollowAction, FollowRequest } from "../follow/object-end-options.ts";
import { encodeFollowMessage } from "../follow/wire.ts";
import type { Ownership } from "../host/ownership.ts";
import type { LogMark } from "../storage/records.ts";
import { SQL } from "../storage/sqlite/schema.ts";
import { pageError } from "./answers.ts";
import type { DurableObjectState, DurableObjectStorage, HibernatableWebSocket } from "./types.ts";

/** What an app sets to turn follow mode on (`HarnessObjectOptions.follow`). */
export interface FollowOptions {
  /**
   * Whether `caller` (what `authenticate` returned for the socket's upgrade) may do `action` on a follow link (false
   * or a thrown `NotAuthorized` refuses; any other throw answers `AuthorizeFailed`, retryable, as `authorize` does):
   * `push` and `release` (write powers: they change the object's copy and hand it the work), `lease.acquire`,
   * `lease.renew`, `lease.release`, `lease.leaving` (a closing page's word on its own socket, decision 0101: allow it
   * where you allow `lease.release`), and other topics' calls (`places.…`). Required: follow mode writes.
   *
   * `place` is the place the frame speaks for when it names one (a push's or release's `from`, the first argument of
   * `lease.*` and `follow.*`, a `server-tools.call` request's `place`): check it to bind each caller to its own place — without that check any caller allowed
   * `lease.*` may acquire or hand back the lease under another device's name (the epochs still fence the loser).
   * For `page-calls.claimPageCall`/`answerPageCall`, `place` is the place the socket follows or speaks for, and
   * `request.conversationId` the conversation the object's harness has that page call in (read there, never the
   * caller's; absent when it has no such call): check it to grant page calls per conversation (decision 0051).
   */
  authorize(caller: Json, action: FollowAction, place?: string, request?: FollowRequest): boolean | Promise<boolean>;
  /** How long a lease lasts unless renewed, on the object's clock. Default 30,000 ms. */
  ttlMs?: number;
  /** The object's place name in the lease. Default "object". */
  place?: string;
  /**
   * Transactions the object's log keeps behind its head while it holds the lease (decision 0047): older ones are
   * trimmed, and a tab further behind rebuilds from the object's snapshot. Default 1,024.
   */
  keepLog?: number;
}

/** The follow link's path on the object. */
export const FOLLOW_PATH = "/follow";
const FOLLOW_TAG = "follow";

const TABLE = `CREATE TABLE IF NOT EXISTS pi_follow_lease (key TEXT PRIMARY KEY, record TEXT NOT NULL) WITHOUT ROWID`;

/** The object's `LeaseBook`, its record in the object's own SQLite. */
export function objectLeaseBook(
  storage: DurableObjectStorage,
  ttlMs = DEFAULT_LEASE_TTL_MS,
  onHolder?: (holder: string | undefined) => void,
): LeaseBook {
  const sql = storage.sql;
  sql.exec(TABLE);
  return new LeaseBook({
    clock: systemClock,
    ttlMs,
    load: () => {
      const row = sql.exec("SELECT record FROM pi_follow_lease WHERE key = 'lease'").toArray()[0];
      return row ? (JSON.parse(String(row.record)) as LeaseRecord) : { epoch: 0 };
    },
    save: (record) => {
      sql.exec("INSERT OR REPLACE INTO pi_follow_lease (key, record) VALUES ('lease', ?)", JSON.stringify(record));
    },
    // The object's copy: a tab with a stale or forked copy must not take the lease and write over its history.
    copyHead: () => copyHead(sql),
    // A reset object (its storage deleted) begins a new history: from a random epoch, not 1 again (decision 0074).
    firstEpoch: () => randomFirstEpoch(cryptoRandom),
    // The object's own pages are told a new holder at once (decision 0075).
    ...(onHolder ? { onHolder } : {}),
  });
}

/** Uniform in [0, 1) from the platform's CSPRNG (53 random bits). */
function cryptoRandom(): number {
  const [high, low] = crypto.getRandomValues(new Uint32Array(2));
  return ((high! >>> 5) * 2 ** 26 + (low! >>> 6)) / 2 ** 53;
}

/**
 * The log head of the object's copy and the epoch that wrote it, read synchronously (position 0 before its schema
 * or its first fenced transaction).
 */
function copyHead(sql: DurableObjectStorage["sql"]): LogMark {
  let position = 0;
  try {
    // The log's last row, or its floor once trimmed to nothing (schema version 5, decision 0048).
    const row = sql.exec(SQL.logHead).toArray()[0];
    position = row?.position === null || row?.position === undefined ? 0 : Number(row.position);
  } catch {
    // The copy's schema is not there yet: it holds nothing.
  }
  if (position === 0) return { epoch: 0, position: 0 };
  // A log position is written with its epoch's stretch (schema version 3 on): a failure here is not swallowed.
  const stretch = sql.exec("SELECT epoch FROM pi_durable_epochs WHERE start <= ? ORDER BY start DESC LIMIT 1", position).toArray()[0];
  return { epoch: stretch ? Number(stretch.epoch) : 0, position };
}

/** Lease answers kept by request id: the last this many (a duplicate comes within seconds of its call). */
const KEPT_ANSWERS = 256;
const ANSWERS = `CREATE TABLE IF NOT EXISTS pi_follow_answers (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, answer TEXT NOT NULL)`;

/** The object's lease answers by request id (`ObjectEndOptions.answers`), beside the lease's record. */
export function objectAnswers(storage: DurableObjectStorage): AnswerStore {
  const sql = storage.sql;
  sql.exec(ANSWERS);
  return {
    get: (id) => {
      const row = sql.exec("SELECT answer FROM pi_follow_answers WHERE id = ?", id).toArray()[0];
      return row ? (JSON.parse(String(row.answer)) as Json) : undefined;
    },
    put: (id, answer) => {
      sql.exec("INSERT OR REPLACE INTO pi_follow_answers (id, answer) VALUES (?, ?)", id, JSON.stringify(answer));
      sql.exec(`DELETE FROM pi_follow_answers WHERE seq <= (SELECT max(seq) FROM pi_follow_answers) - ${KEPT_ANSWERS}`);
    },
  };
}

/** What a follow socket keeps through a hibernation. */
interface FollowAttachment {
  version: 1;
  follow: true;
  caller: Json;
  /** The tab follows the object's log (decision 0038): the object's next instance pushes to it too. */
  following?: true;
  /** The place it speaks for (`SpeaksFor`): the object's calls of that place go on it (decision 0037). */
  place?: string;
  /** The pages whose page tool calls were claimed through it (decision 0051): connected while it is open. */
  pages?: string[];
  /**
   * More of them, each a page's provisions (`provisionOf`: `${page}~${part}`, decision 0152) as `[page, ...parts]`: the
   * page's id once, so a tab with many provisions holding claims fits (about 150 rather than 35).
   */
  provisions?: string[][];
}

/** `pages` as kept in an attachment: the provisions of one page grouped under its id, the other ids as they are. */
function packed(pages: readonly string[]): Pick<FollowAttachment, "pages" | "provisions"> {
  const plain: string[] = [];
  const groups = new Map<string, string[]>();
  for (const page of pages) {
    const cut = page.lastIndexOf("~");
    if (cut < 0) plain.push(page);
    else {
      const prefix = page.slice(0, cut);
      const group = groups.get(prefix) ?? [];
      group.push(page.slice(cut + 1));
      groups.set(prefix, group);
    }
  }
  return {
    ...(plain.length > 0 ? { pages: plain } : {}),
    ...(groups.size > 0 ? { provisions: [...groups].map(([prefix, parts]) => [prefix, ...parts]) } : {}),
  };
}

/**
 * Keeps with a follow socket the pages that claimed page tool calls through it (`ObjectEndOptions.claimedPages`), so
 * the object's next instance counts them as connected (`claimedThroughFollow`). As many as fit in the attachment
 * (2 KB with the caller and place), newest first; a page that does not fit loses its claim at the next instance. A
 * page's provisions are kept under its id once (`packed`): with a small caller about 150 fit (35 as whole ids).
 */
export function keepClaimedPages(socket: HibernatableWebSocket, pages: readonly string[]): void {
  let attachment: FollowAttachment | undefined;
  try {
    attachment = socket.deserializeAttachment() as FollowAttachment | undefined;
  } catch {
    return; // closing
  }
  if (attachment?.follow !== true) return;
  for (let kept = pages.length; kept >= 0; kept--) {
    try {
      const { pages: _old, provisions: _older, ...rest } = attachment;
      socket.serializeAttachment(kept === 0 ? rest : { ...rest, ...packed(pages.slice(pages.length - kept)) });
      return;
    } catch {
      // Too large: keep one page fewer.
    }
  }
}

/** The open follow sockets with the pages kept with each by `keepClaimedPages` (those with any). */
export function claimsKept(ctx: DurableObjectState): Array<[HibernatableWebSocket, string[]]> {
  return (ctx.getWebSockets?.(FOLLOW_TAG) ?? [])
    .map((socket): [HibernatableWebSocket, string[]] => [socket, claimedPagesOf(socket)])
    .filter(([, pages]) => pages.length > 0);
}

function claimedPagesOf(socket: HibernatableWebSocket): string[] {
  try {
    const attachment = socket.deserializeAttachment() as FollowAttachment | undefined;
    const texts = (values: unknown): string[] =>
      Array.isArray(values) ? values.filter((value): value is string => typeof value === "string") : [];
    const provisions = (Array.isArray(attachment?.provisions) ? attachment.provisions : []).flatMap((group) => {
      const [prefix, ...parts] = texts(group);
      return prefix === undefined ? [] : parts.map((part) => `${prefix}~${part}`);
    });
    return [...texts(attachment?.pages), ...provisions];
  } catch {
    return [];
  }
}

/** Every page that claimed through a follow socket still open (the open's `connectedPages`, decision 0051). */
export function claimedThroughFollow(ctx: DurableObjectState): string[] {
  return claimsKept(ctx).flatMap(([, pages]) => pages);
}

/** Accepts a follow link for `caller`: the tab's end of a new socket (101). */
export function acceptFollow(ctx: DurableObjectState, caller: Json): Response {
  const Pair = (globalThis as unknown as { WebSocketPair?: new () => Record<0 | 1, HibernatableWebSocket> }).WebSocketPair;
  if (!Pair || !ctx.acceptWebSocket) return new Response("WebSockets need the Workers runtime.", { status: 501 });
  const { 0: tab, 1: object } = new Pair();
  try {
    object.serializeAttachment({ version: 1, follow: true, caller } satisfies FollowAttachment);
  } catch {
    return Response.json(
      { error: pageError(new InvalidRequest("The caller that authenticate returned does not fit in a socket's attachment (2 KB).")) },
      { status: 400 },
    );
  }
  ctx.acceptWebSocket(object, [FOLLOW_TAG]);
  return new Response(null, { status: 101, webSocket: tab } as ResponseInit);
}

/** The caller of a follow socket and the place it speaks for, or undefined when the socket is a page's. */
export function followCaller(socket: HibernatableWebSocket): { caller: Json; place?: string } | undefined {
  try {
    const attachment = socket.deserializeAttachment() as FollowAttachment | undefined;
    if (attachment?.version !== 1 || attachment.follow !== true) return undefined;
    return typeof attachment.place === "string" ? { caller: attachment.caller, place: attachment.place } : { caller: attachment.caller };
  } catch {
    return undefined;
  }
}

/**
 * Marks a follow socket whose tab follows the object's log (it asked `follow.from`), so that the object's next
 * instance, after a hibernation or an eviction that kept the socket, pushes to it again (`followingSockets`).
 */
export function markFollowing(socket: HibernatableWebSocket): void {
  try {
    const attachment = socket.deserializeAttachment() as FollowAttachment | undefined;
    if (attachment?.follow === true && !attachment.following) socket.serializeAttachment({ ...attachment, following: true });
  } catch {
    // Closed or closing: the tab asks again when it reconnects.
  }
}

/** The follow sockets whose tabs follow the object's log. */
export function followingSockets(ctx: DurableObjectState): HibernatableWebSocket[] {
  return (ctx.getWebSockets?.(FOLLOW_TAG) ?? []).filter((socket) => {
    try {
      return (socket.deserializeAttachment() as FollowAttachment | undefined)?.following === true;
    } catch {
      return false;
    }
  });
}

/** Keeps in the socket's attachment that it speaks for `place` (through a hibernation). */
export function speaksFor(socket: HibernatableWebSocket, caller: Json, place: string): void {
  if (followCaller(socket)?.place === place) return;
  try {
    const attachment = socket.deserializeAttachment() as FollowAttachment | undefined;
    socket.serializeAttachment({ ...attachment, version: 1, follow: true, caller, place } satisfies FollowAttachment);
  } catch {
    // Closing, or the caller and place no longer fit: the object finds this place on its next frame instead.
  }
}

/** The follow sockets open for `place`, oldest first. */
function socketsOf(ctx: DurableObjectState, place: string): HibernatableWebSocket[] {
  return (ctx.getWebSockets?.(FOLLOW_TAG) ?? []).filter((socket) => followCaller(socket)?.place === place);
}

/** How the object reaches `place` (`ObjectEndOptions.connection`): its newest follow socket, if one is open. */
export function followConnection(ctx: DurableObjectState, place: string): ((frame: string) => void) | undefined {
  const socket = socketsOf(ctx, place).at(-1);
  return socket ? (frame) => socket.send(frame) : undefined;
}

/** Whether `closing` was the last follow socket open for its place (then the calls waiting on it are lost). */
export function lastOfPlace(ctx: DurableObjectState, closing: HibernatableWebSocket): string | undefined {
  const place = followCaller(closing)?.place;
  if (place === undefined) return undefined;
  return socketsOf(ctx, place).some((socket) => socket !== closing) ? undefined : place;
}

/** Sends a frame on a follow socket; one that is gone hears nothing (the tab sends again when it reconnects). */
export function sendFollow(socket: HibernatableWebSocket, frame: string): void {
  try {
    socket.send(frame);
  } catch {
    // Closed or closing.
  }
}

/** The host's ownership in follow mode: the harness opens once the object takes the lease (`open()`). */
export function takeoverGate(): { ownership: Ownership; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return {
    open,
    ownership: {
      acquire: async () => {
        await opened;
        return () => {};
      },
      cancel: () => {},
      requestTakeover: () => {},
      onTakeoverRequest: () => {},
      lifeLock: async () => undefined,
    },
  };
}

/** Answers a follow frame the object cannot serve at all (its copy could not open): why, and nothing applied. */
export function refuseFollow(socket: HibernatableWebSocket, error: unknown): undefined {
  sendFollow(socket, encodeFollowMessage({ type: "refused", head: 0, error: pageError(error) }));
  return undefined;
}
