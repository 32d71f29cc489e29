/**
 * Who may call what, on Cloudflare: a signed token checked in the Worker, one object per user, and the
 * object checking the caller on connect and per call (the README's "Who may call what"). The edge tests run
 * this Worker's routing and object in workerd.
 *
 * - A token is `<user>.<signature>`: the user's id and an HMAC-SHA256 of it under a secret only the app's
 *   servers know (`signToken` on your login server; WebCrypto, nothing to install).
 * - The Worker (`routeSigned`) verifies it (`Authorization: Bearer …`, or `?token=` for a browser's WebSocket,
 *   which cannot set headers), sends the request to that user's own object, and says who is calling in a
 *   header that only the Worker sets (a client's own copy of the header is dropped).
 * - The object (`UserAgent`) takes the caller from that header when a socket connects or `POST /rpc` arrives
 *   (`authenticate`; the caller stays with the socket through hibernation) and admits each call only from its
 *   own user (`authorize`). Pages get the page calls (submit, read, subscribe); `createTask` is the one power
 *   turned on here.
 */
import { type DurableObjectState, HarnessObject } from "../src/cloudflare/index.ts";
import { createRegistry, defineExtension } from "../src/index.ts";
import { counterTask } from "./counter-task.ts";

/** The header through which the Worker tells the object who is calling. */
export const CALLER_HEADER = "x-pi-durable-caller";

const encoder = new TextEncoder();

function hmacKey(secret: string): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
}

function toBase64Url(bytes: ArrayBuffer): string {
  return btoa(String.fromCharCode(...new Uint8Array(bytes)))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replace(/=+$/, "");
}

function fromBase64Url(text: string): Uint8Array<ArrayBuffer> | undefined {
  try {
    const binary = atob(text.replaceAll("-", "+").replaceAll("_", "/"));
    return Uint8Array.from(binary, (char) => char.charCodeAt(0));
  } catch {
    return undefined;
  }
}

/** A token for `user` (user ids here are URL-safe and contain no "."). */
export async function signToken(secret: string, user: string): Promise<string> {
  return `${user}.${toBase64Url(await crypto.subtle.sign("HMAC", await hmacKey(secret), encoder.encode(user)))}`;
}

/** The user a token was signed for, or undefined (`crypto.subtle.verify` compares in constant time). */
export async function verifyToken(secret: string, token: string | null | undefined): Promise<string | undefined> {
  const dot = token?.lastIndexOf(".") ?? -1;
  if (!token || dot <= 0) return undefined;
  const user = token.slice(0, dot);
  const signature = fromBase64Url(token.slice(dot + 1));
  if (!signature) return undefined;
  return (await crypto.subtle.verify("HMAC", await hmacKey(secret), signature, encoder.encode(user))) ? user : undefined;
}

/** The namespace binding of `UserAgent` (a `DurableObjectNamespace`). */
export interface UserAgents {
  idFromName(name: string): { toString(): string };
  get(id: { toString(): string }): { fetch(request: Request): Promise<Response> };
}

export interface SignedEnv {
  USERS: UserAgents;
  /** The HMAC secret (`wrangler secret put TOKEN_SECRET`). */
  TOKEN_SECRET: string;
}

/** The Worker's part: verify the token, then forward to the caller's own object with the caller named. */
export async function routeSigned(request: Request, env: SignedEnv): Promise<Response> {
  const url = new URL(request.url);
  const bearer = request.headers.get("authorization")?.match(/^Bearer (.+)$/)?.[1];
  const user = await verifyToken(env.TOKEN_SECRET, bearer ?? url.searchParams.get("token"));
  if (!user) return Response.json({ error: { name: "NotAuthorized", message: "Sign in first: no valid token." } }, { status: 401 });
  url.searchParams.delete("token");
  const forwarded = new Request(url, request);
  forwarded.headers.set(CALLER_HEADER, user); // replaces any copy the client sent
  return env.USERS.get(env.USERS.idFromName(user)).fetch(forwarded);
}

/** One user's object: it serves only that user, who may submit, read, subscribe, and create tasks. */
export class UserAgent extends HarnessObject<SignedEnv> {
  constructor(ctx: DurableObjectState, env: SignedEnv) {
    const owner = ctx.id.toString();
    super(ctx, env, () => ({
      registry: createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(() => {})] })),
      powers: ["createTask"],
      // On connect (and for each POST /rpc): the caller the Worker named, or no one (refused with 401).
      authenticate: (request) => request.headers.get(CALLER_HEADER) ?? undefined,
      // On every call and subscription: only this object's own user.
      authorize: (caller) => typeof caller === "string" && env.USERS.idFromName(caller).toString() === owner,
    }));
  }
}
