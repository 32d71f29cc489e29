/**
 * The demo's harness on a Cloudflare Durable Object (`npm run start:edge`): the same extensions, the offline
 * demo model and the client API the demo page uses, served by `HarnessObject` over a WebSocket. Files live in
 * the object's memory (an eviction loses them; the transcript and tasks are in its SQLite). Printed lines go
 * to the object's console (workerd's output), since an object has no BroadcastChannel to the page.
 */
import { counterTask } from "../examples/counter-task.ts";
import { ALL_POWERS, type DurableObjectState, type FollowOptions, HarnessObject } from "../src/cloudflare/index.ts";
import { createRegistry, defineExtension, memoryEnvs } from "../src/index.ts";
import { demoMethods } from "./methods.ts";
import { createDemoModels } from "./models.ts";
import { filesExtension, pageToolsExtension } from "./tools.ts";

export class DemoObject extends HarnessObject {
  constructor(state: DurableObjectState, env: unknown, follow?: FollowOptions) {
    const models = createDemoModels();
    const envs = memoryEnvs();
    super(state, env, () => ({
      registry: createRegistry()
        .install(defineExtension({ name: "demo", tasks: [counterTask((line) => console.log(line))] }))
        .install(filesExtension("unsafe"))
        .install(pageToolsExtension),
      models: models.models,
      env: envs,
      // The demo's page does everything a page can (tasks, SQL, models, files): a demo to run locally. An app on
      // the internet lists the powers its pages need, and checks its callers (README: "Who may call what").
      powers: ALL_POWERS,
      methods: demoMethods(models, envs),
      ...(follow ? { follow } : {}),
    }));
  }
}

/**
 * The demo's object in follow mode (`?follow=`, decision 0035): a tab runs the agent under its lease and the object
 * carries on when the tab closes. Every caller may follow it, as every caller has the powers: a demo to run locally.
 */
export class FollowDemoObject extends DemoObject {
  constructor(state: DurableObjectState, env: unknown) {
    super(state, env, { authorize: () => true });
  }
}

interface Namespace {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(request: Request): Promise<Response> };
}

/**
 * Every connection goes to one object, named by the path's first part (`/demo` by default; names that start with
 * `follow` are follow-mode objects where FOLLOW is bound); the rest of the path is the object's own (`/follow`).
 */
export default {
  fetch(request: Request, env: { DEMO: Namespace; FOLLOW?: Namespace }) {
    const url = new URL(request.url);
    const [, name = "", ...rest] = url.pathname.split("/");
    url.pathname = `/${rest.join("/")}`;
    const namespace = name.startsWith("follow") && env.FOLLOW ? env.FOLLOW : env.DEMO;
    return namespace.get(namespace.idFromName(name || "demo")).fetch(new Request(url, request));
  },
};
