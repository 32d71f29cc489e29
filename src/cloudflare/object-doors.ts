/**
 * The doors of a harness object (object.ts): who is calling (`authenticate`, from the request that opens a socket or
 * posts to `/rpc`), and each call through the protocol's table, the powers the object turns on and `authorize`
 * (src/host/doors.ts) — whose failures the app hears through `onAuthorizeError` (decision 0117, later).
 */
import type { Json } from "../base/json.ts";
import { guardEndpoint } from "../host/doors.ts";
import type { HostEndpoint } from "../host/endpoint.ts";
import type { HarnessObjectOptions } from "./options.ts";

/**
 * Why an object serves no page the methods its protocol row marks `servedToPages: false` (`close`,
 * `requestTakeover`): the object's life is the runtime's, not a page's.
 */
const NOT_SERVED =
  "a Durable Object's harness lives as long as the object and has one instance at a time; a page leaves with client.close().";

export type ObjectDoors = Pick<HarnessObjectOptions, "powers" | "authenticate" | "authorize" | "onAuthorizeError">;

/** The doors the app set (only those). */
export function objectDoors(options: ObjectDoors): ObjectDoors {
  const { powers, authenticate, authorize, onAuthorizeError } = options;
  return {
    ...(powers ? { powers } : {}),
    ...(authenticate ? { authenticate } : {}),
    ...(authorize ? { authorize } : {}),
    ...(onAuthorizeError ? { onAuthorizeError } : {}),
  };
}

/** Who sent `request` (`authenticate`), or undefined when it is refused; `null` when the object checks no one. */
export async function authenticateRequest(doors: ObjectDoors, request: Request): Promise<Json | undefined> {
  const { authenticate } = doors;
  if (!authenticate) return null;
  try {
    return await authenticate(request);
  } catch {
    return undefined;
  }
}

/** `endpoint` as `caller` reaches it through the object's doors. */
export function guardObjectEndpoint(endpoint: HostEndpoint, caller: Json, doors: ObjectDoors): HostEndpoint {
  const { authenticate: _authenticate, ...guard } = doors;
  return guardEndpoint(endpoint, caller, { ...guard, notServed: NOT_SERVED });
}
