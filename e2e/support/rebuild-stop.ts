import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Page, Worker } from "playwright-core";
import { expect } from "vitest";
import { harnessWorker } from "../../src/testing/playwright";

// A reload "in the middle of a rebuild" without a race against the held part's call bound (15 s on the worker's real
// clock; decision 0147): the worker is stopped — blocked in a synchronous request this server holds — at a moment its
// own log shows a snapshot part asked and no reopen since, so no timer of it (the bound, a retry) can fire before the
// reload ends it. Before, the reload only usually came within the bound; on a loaded machine it could fall after the
// failed rebuild had opened the old copy again, and the test still passed, testing a plain reload.

declare global {
  /** The worker's rebuild log: "part" for each snapshot part it sends (resends too), then each status's kind. */
  var e2eRebuildLog: string[] | undefined;
}

/**
 * Starts the log in the page's harness worker: its follow socket's sends of a snapshot part (after the first: the
 * part the edge's `hold-snapshot-parts` holds) and its host's statuses, in one order.
 */
export async function watchRebuild(page: Page): Promise<Worker> {
  const worker = await harnessWorker(page);
  await worker.evaluate(async () => {
    const log: string[] = [];
    globalThis.e2eRebuildLog = log;
    const send = WebSocket.prototype.send;
    WebSocket.prototype.send = function (this: WebSocket, data: Parameters<WebSocket["send"]>[0]) {
      if (typeof data === "string" && data.includes('"snapshot"'))
        try {
          const call = JSON.parse(data) as { type?: unknown; topic?: unknown; method?: unknown; args?: unknown[] };
          const part = call.args?.[2];
          if (call.type === "call" && call.topic === "follow" && call.method === "snapshot" && typeof part === "number" && part > 0)
            log.push("part");
        } catch {
          // not a follow frame
        }
      return send.call(this, data);
    };
    const host = (globalThis as unknown as { __piDurableHost: { onStatus(listener: (status: { kind: string }) => void): unknown } })
      .__piDurableHost;
    await host.onStatus((status) => void log.push(status.kind));
  });
  return worker;
}

/** A server whose one route never answers until `release()`: a synchronous request to it blocks a worker's thread. */
export async function workerStop() {
  const held: ServerResponse[] = [];
  const arrived = new Set<() => void>();
  const server = createServer((_request, response) => {
    held.push(response);
    for (const told of [...arrived]) told();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/stop`;
  const release = () => {
    for (const response of held.splice(0)) response.writeHead(204, { "access-control-allow-origin": "*" }).end();
  };
  return {
    /**
     * Stops `worker` in the middle of its rebuild: once its log shows a part asked with no reopen (`opening`) after it,
     * that check and the blocking request are one synchronous step in the worker. Resolves once the request arrived.
     */
    async inTheMiddle(worker: Worker, what: string): Promise<void> {
      for (;;) {
        await expect
          .poll(
            () =>
              worker.evaluate(() => {
                const log = globalThis.e2eRebuildLog ?? [];
                const last = log.lastIndexOf("part");
                return last >= 0 && !log.slice(last).includes("opening");
              }),
            { timeout: 60_000, message: `${what}: a snapshot part asked, no reopen since` },
          )
          .toBe(true);
        let told = () => {};
        const stopped = new Promise<string>((resolve) => {
          told = () => resolve("stopped");
          arrived.add(told);
        });
        const checked = worker
          .evaluate((url) => {
            const log = globalThis.e2eRebuildLog ?? [];
            const last = log.lastIndexOf("part");
            if (last < 0 || log.slice(last).includes("opening")) return "moved on";
            const request = new XMLHttpRequest();
            request.open("GET", url, false); // blocks this thread: no timer, no message, until released or ended
            try {
              request.send();
            } catch {
              // ended by the reload
            }
            return "released";
          }, url)
          .catch(() => "ended");
        const first = await Promise.race([stopped, checked]);
        arrived.delete(told);
        if (first === "stopped") return;
      }
    },
    release,
    async close(): Promise<void> {
      release();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
