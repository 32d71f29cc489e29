/**
 * Where the core draws the random part of the ids it mints (a follow link's call ids, the object's call and snapshot
 * ids, a forwarded write's key, a page's id): given to it, as the harness clock is (decision 0078), so a test gives
 * ids it chose and the core itself never reads a platform's random source. The adapters (src/browser,
 * src/cloudflare) pass `randomIds`; a core class given none uses it too.
 *
 * An id source must not repeat across instances: the other end of a link remembers answers by id, and an object that
 * started again (an eviction) must never be given an earlier instance's answer.
 */
export type IdSource = () => string;

/** A random UUID per call (`crypto.randomUUID`, in every runtime this package runs in): the one place the core reads it. */
export const randomIds: IdSource = () => globalThis.crypto.randomUUID();
