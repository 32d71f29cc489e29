import type { HarnessStatus } from "pi-durable-web/client";

/**
 * Where the agent runs now, always on screen, and the control that moves it (decisions 0035, 0038, 0045):
 * - `?follow=` (the tab's worker under its Durable Object's lease): "this tab" while it holds the lease — Move to
 *   the Durable Object (`client.leave()`: the object takes over and this tab follows it live) —, "the Durable
 *   Object" while the object holds it — Run here (`client.runHere()`: the lease comes back, the next epoch); "another
 *   tab or device" (by its place in the lease, from the object's own record: `status.heldBy`, decision 0057) while
 *   another of the user's tabs or devices holds it — no button (the object hands back only its own lease);
 * - `?edge=` (this page is a client of the object): the object, or the tab or device that holds its lease (by its
 *   place, from the object's own record: `status.heldBy`, decision 0067); nothing to move from here (this page has
 *   no harness of its own);
 * - neither (the offline demo): this tab only, and the bar says why nothing can move rather than showing a button.
 */
export type PageMode = "tab" | "follow" | "edge";

export type Move = "leave" | "runHere" | "retryRebuild";

export interface Place {
  /** `data-place`: here (this tab), object, tab (another tab holds the object's lease), unknown (not open yet). */
  key: "here" | "object" | "tab" | "unknown";
  where: string;
  epoch?: number;
  note: string;
  move?: Move;
}

/** What the bar says for `status` on a page in `mode`. */
export function placeOf(mode: PageMode, status: HarnessStatus): Place {
  if (status.kind !== "ready") {
    const where = mode === "tab" ? "this tab" : mode === "edge" ? "the Durable Object" : "…";
    const note = mode === "follow" ? "Asking the Durable Object for the lease…" : "Not open yet.";
    return { key: mode === "tab" ? "here" : mode === "edge" ? "object" : "unknown", where, note };
  }
  const epoch = status.epoch === undefined ? {} : { epoch: status.epoch };
  if (mode === "tab")
    return {
      key: "here",
      where: "this tab only",
      note: "The offline demo has no Durable Object to move it to. Open the demo with ?follow= (npm run start:edge) to have it go on when the tab closes.",
    };
  if (mode === "edge") {
    // The object names the holder from its own lease record (status.heldBy, decision 0067); an older object does not.
    if (status.runs === "elsewhere" && status.heldBy?.kind !== "object")
      return {
        key: "tab",
        where: status.heldBy ? `another tab or device (${shortPlace(status.heldBy.place)})` : "a tab that holds the object's lease",
        ...epoch,
        note: "This page watches the Durable Object's copy live; what you send here is forwarded to that tab.",
      };
    return {
      key: "object",
      where: "the Durable Object",
      ...epoch,
      note: "This page is one of its clients: close it and the agent goes on. To run it in a tab, open the demo with ?follow= and press Run here.",
    };
  }
  if (status.role === "follower")
    return {
      key: status.runs === "here" ? "here" : "object",
      where: status.runs === "here" ? "another tab of this browser" : "the Durable Object",
      ...epoch,
      note: "Another tab of this browser has the database open and this tab works through it: move the agent from that tab.",
    };
  // The worker stopped rebuilding this copy from the object's snapshot by itself (decision 0078): say so, offer a retry.
  if (status.rebuild)
    return {
      key: "object",
      where: "the Durable Object",
      ...epoch,
      note: `This tab could not rebuild its copy from the Durable Object (${status.rebuild.tries} tries; last: ${status.rebuild.error.message}). It shows what it had, read-only.`,
      move: "retryRebuild",
    };
  if (status.runs === "here")
    return {
      key: "here",
      where: "this tab",
      ...epoch,
      note: "The Durable Object mirrors every step. Close the tab (or move it) and the object carries the work on.",
      move: "leave",
    };
  if (status.heldBy?.kind === "tab")
    return {
      key: "tab",
      where: `another tab or device (${shortPlace(status.heldBy.place)})`,
      ...epoch,
      note: "That tab holds the Durable Object's lease and runs the agent; this one opens read-only. Move the agent (or close that tab): the object takes over, and Run here appears here.",
    };
  return {
    key: "object",
    where: "the Durable Object",
    ...epoch,
    note: "This tab follows it live, read-only. Run here takes the lease back: the tab goes on from the object's last step.",
    move: "runHere",
  };
}

/** A lease place as the strip names it: a device's `tab-<uuid>` by its first 8 hex digits; others cut at 40 characters. */
export function shortPlace(place: string): string {
  const device = /^tab-([0-9a-f]{8})[0-9a-f-]*$/.exec(place);
  if (device) return `tab-${device[1]}`;
  return place.length > 40 ? `${place.slice(0, 39)}…` : place;
}

/** The status line's part about the place (", the agent runs in this tab"); empty where nothing can move. */
export function runsPhrase(mode: PageMode, status: HarnessStatus & { kind: "ready" }): string {
  if (status.runs === undefined) return "";
  const elsewhere =
    mode === "edge"
      ? status.heldBy?.kind === "object"
        ? "on the Durable Object"
        : status.heldBy
          ? "in another tab or device"
          : "in the tab that holds the lease"
      : status.heldBy?.kind === "tab"
        ? "in another tab or device"
        : "on the Durable Object";
  const here = mode === "edge" ? "on the Durable Object" : "in this tab";
  return `, the agent runs ${status.runs === "here" ? here : elsewhere}`;
}
