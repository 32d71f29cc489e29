import type { Page } from "playwright-core";
import { inject } from "vitest";
import WebSocket from "ws";
import type { BrowserSession } from "./browser";
import { openDemo, waitForStatus } from "./demo";
import type { LocalObject } from "./edge";

/** A document of the demo's origin that is no demo page (its icon): it only listens. */
const RECORDER = "icon.svg";

/**
 * Every line the tab's workers printed (the demo's print broadcast), in order. The broadcast is heard by a page of
 * its own on the demo's origin, so a print a worker made as its page closed or crashed is heard all the same.
 * Call once per test, before the first page opens.
 */
export async function recordTabPrints(session: BrowserSession): Promise<string[]> {
  const lines: string[] = [];
  await session.context.exposeFunction("e2eTabPrinted", (line: string) => void lines.push(line));
  await session.context.addInitScript((recorder: string) => {
    if (!location.pathname.endsWith(`/${recorder}`)) return;
    const forward = (globalThis as unknown as { e2eTabPrinted(line: string): void }).e2eTabPrinted;
    new BroadcastChannel("pi-durable-web:print").addEventListener("message", (event) => forward(String(event.data.line)));
  }, RECORDER);
  const recorder = await session.context.newPage();
  await recorder.goto(`${inject("demoBaseUrl")}${RECORDER}`);
  return lines;
}

/** The demo page following object `name` (`?follow=`), once ready. */
export async function openFollowing(session: BrowserSession, edge: LocalObject, name: string): Promise<Page> {
  const page = await openDemo(session, `?follow=${encodeURIComponent(edge.followUrl(name))}`);
  await waitForStatus(page, "ready");
  return page;
}

/** The number in a counter line `tick n`. */
export const tickOf = (line: string): number => Number(line.split(" ")[1]);

/** The lease's holder as object `name` says it (`follow.from` on a socket of this test's own: its `holder`). */
export async function holderOf(followUrl: string): Promise<{ place: string; object: boolean } | undefined> {
  const socket = new WebSocket(followUrl);
  try {
    return await new Promise((resolve, reject) => {
      socket.on("error", reject);
      socket.on("open", () => socket.send(JSON.stringify({ type: "call", id: "hello", topic: "wire", method: "hello", args: [6] })));
      socket.on("message", (data) => {
        const message = JSON.parse(String(data)) as { type: string; id?: string; value?: { holder?: { place: string; object: boolean } } };
        if (message.type !== "answer") return;
        if (message.id === "hello")
          socket.send(JSON.stringify({ type: "call", id: "from", topic: "follow", method: "from", args: ["e2e-watcher", 0] }));
        else if (message.id === "from") resolve(message.value?.holder);
      });
    });
  } finally {
    socket.close();
  }
}

/** The HTTP URL of a route of object `name`'s e2e Worker (e2e/edge/worker.ts: `/heard`, `/seed`). */
function routeOf(edge: LocalObject, name: string, route: string): string {
  return edge
    .followUrl(name)
    .replace(/^ws/, "http")
    .replace(/\/follow$/, `/${route}`);
}

/** What object `name` heard from a leaving tab: its worker's releases and its page's `lease.leaving`s. */
export async function heardBy(edge: LocalObject, name: string): Promise<{ release: number; leaving: number }> {
  return (await fetch(routeOf(edge, name, "heard")).then((response) => response.json())) as { release: number; leaving: number };
}

/** The seed's query (`SEED_QUERY`: id, status, n, memos, restarts) over object `name`'s own tasks table; [] before it has one. */
export async function seedOf(edge: LocalObject, name: string): Promise<Array<{ id: number; status: string; restarts: number | null }>> {
  const response = await fetch(routeOf(edge, name, "seed"));
  if (!response.ok) return [];
  return (await response.json()) as Array<{ id: number; status: string; restarts: number | null }>;
}

/** A client API call of object `name` over `POST /rpc` (its `query` reads the object's own log: `pi_durable_log`). */
export async function rpcOf(edge: LocalObject, name: string, method: string, ...args: unknown[]): Promise<unknown> {
  const response = await fetch(`${edge.socketUrl(name).replace(/^ws:/, "http:")}/rpc`, {
    method: "POST",
    body: JSON.stringify({ method, args }),
  });
  const body = (await response.json()) as { value?: unknown; error?: unknown };
  if (!response.ok) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.value;
}
