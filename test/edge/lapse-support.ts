/** The lapse tests' object (test/edge/*-in-lapse.edge.test.ts): a tab hands its idle lease to the object, which lapses. */
import { systemClock } from "../../src/base/clock.ts";
import { FollowLink } from "../../src/follow/link-client.ts";
import { Mirror, remoteArbiter } from "../../src/follow/mirror.ts";
import { BACKGROUND_CONTEXT as ctx, Harness, type Registry, type Storage } from "../../src/index.ts";
import { followSocket, until } from "./follow-support.ts";
import type { Edge } from "./support.ts";

/** The follow object's lease state (its test door `/state`). */
export const objectState = (edge: Edge, name: string) =>
  edge.json("follow", name, "/state") as Promise<{
    holding: boolean;
    head: number;
    lease?: { holder?: string; epoch: number; expiresAt?: number };
  }>;

/** The name of the object's current instance (its test door `/instance`). */
export const instanceOf = async (edge: Edge, name: string) =>
  ((await edge.json("follow", name, "/instance")) as { instance: string }).instance;

/** A tab's follow link to object `name` as alice, once its socket is open. */
export async function openTabLink(edge: Edge, name: string) {
  const link = new FollowLink({ clock: systemClock, send: (frame) => socket.send(frame), resendMs: 500 });
  const socket = followSocket(edge, name, "alice", link);
  await until("the follow socket opens", () => socket.open);
  return { link, socket };
}

/** A tab opens on `storage` under the link, hands the lease over to the object (decision 0038) with nothing running,
 *  and closes; the root conversation's id. */
export async function handOverIdle(storage: Storage, registry: Registry, link: FollowLink) {
  const tab = await Harness.open(storage, { registry, lease: { place: "tab", arbiter: remoteArbiter(link) } }, ctx);
  const conversationId = (await tab.root(ctx)).id;
  const mirror = new Mirror({ harness: tab, link, clock: systemClock, resendMs: 500 });
  await mirror.handOver(ctx);
  mirror.stop();
  await tab.close(ctx);
  return conversationId;
}

/** Holds the object's alarms (the one that would end this instance does nothing on it) and waits until its idle lease
 *  lapsed. */
export async function holdUntilLapsed(edge: Edge, name: string) {
  await edge.json("follow", name, "/hold-alarms");
  await until(
    "the idle lease lapsed",
    async () => ((await objectState(edge, name)).lease?.expiresAt ?? Number.POSITIVE_INFINITY) < Date.now() - 200,
  );
}
