/**
 * This browser's default place in a conversation's lease (decision 0046): `tab-<random id>`, made once and kept in
 * the origin's private file system, so every tab and every reload of one browser profile is one place, and two
 * browsers of one user (two devices) are two — each follows under its own name instead of both calling themselves
 * "tab" and taking the lease from each other.
 *
 * ```ts
 * const place = await devicePlace(); // "tab-6f1c…", the same after a reload
 * ```
 */

/** The file at the OPFS root that keeps the id (beside the database's own pool directory). */
const FILE = "pi-durable-web.place";
const PLACE = /^tab-[0-9a-f-]{36}$/;

/**
 * This browser profile's place: read from its file, or made and written there the first time (under a Web Lock, so
 * two tabs opening at once agree on one).
 */
export async function devicePlace(): Promise<string> {
  return navigator.locks.request(`pi-durable-web:${FILE}`, async () => {
    const root = await navigator.storage.getDirectory();
    const handle = await root.getFileHandle(FILE, { create: true });
    const kept = (await (await handle.getFile()).text()).trim();
    if (PLACE.test(kept)) return kept;
    const place = `tab-${crypto.randomUUID()}`;
    const writable = await handle.createWritable();
    await writable.write(place);
    await writable.close();
    return place;
  });
}
