/**
 * The Worker of the hand-over bench (bench/handover.ts), in workerd: `/<name>/follow` is the follow link of the
 * object `name`, a harness object in follow mode (every caller may follow; a 10-minute lease, so only a release
 * hands it over within a run) with the bench's tasks; `bench.relay` prints `object <n>` through PRINT.
 */
import { type DurableObjectState, HarnessObject } from "../src/cloudflare/index.ts";
import { createRegistry, defineExtension } from "../src/index.ts";
import { relayTask } from "./relay-task.ts";
import { effectTask, stepper } from "./stepper.ts";

interface Env {
  PRINT: { fetch(url: string, init: RequestInit): Promise<Response> };
  HANDOVER: { idFromName(name: string): unknown; get(id: unknown): { fetch(request: Request): Promise<Response> } };
}

export class HandoverObject extends HarnessObject<Env> {
  constructor(state: DurableObjectState, env: Env) {
    const print = async (n: number) => void (await env.PRINT.fetch("http://print/", { method: "POST", body: `object ${n}` }));
    super(state, env, () => ({
      registry: createRegistry().install(defineExtension({ name: "bench", tasks: [relayTask(print), effectTask, stepper] })),
      follow: { authorize: () => true, ttlMs: 600_000 },
    }));
  }
}

export default {
  fetch(request: Request, env: Env) {
    const url = new URL(request.url);
    const [, name = "bench", ...rest] = url.pathname.split("/");
    url.pathname = `/${rest.join("/")}`;
    return env.HANDOVER.get(env.HANDOVER.idFromName(name)).fetch(new Request(url, request));
  },
};
