/**
 * The person-in-the-loop object (DESIGN §4c, issue 23): an agent whose one tool, `write_file`, asks a person
 * before every call (`approval: "always"`); objects named `expiring-…` give a person 2 s (`approvalExpiresAfterMs`).
 * The model asks for `write_file({ path: "a.txt" })`, then answers with the tool's result. The tool prints
 * `write <path>` through PRINT (outside the object, so a crash cannot take the line back); prints go as
 * `<name>: …`, or `<id>: …` from an instance the alarm started (it is not told its name).
 *
 * Pages use the client API (the socket, `POST /rpc`); `/state` answers the object's alarm, its tasks and its
 * root conversation's entries; `/crash` aborts the object (`ctx.abort()`: everything in memory is gone).
 * Objects named `follow-…` are in follow mode (decision 0031; any caller may do anything on a follow link).
 */
import {
  createModels,
  type FauxResponseFactory,
  fauxAssistantMessage,
  fauxProvider,
  fauxText,
  fauxToolCall,
  type Message,
} from "@earendil-works/pi-ai";
import { ALL_POWERS, type DurableObjectState, HarnessObject } from "../../src/cloudflare/index.ts";
import { BACKGROUND_CONTEXT as BACKGROUND, createRegistry, defineExtension, definePageTool, defineTool } from "../../src/index.ts";

interface Env {
  PRINT: { fetch(url: string, init: RequestInit): Promise<Response> };
}

export const EXPIRES_AFTER_MS = 2000;

export class ApprovalObject extends HarnessObject<Env> {
  readonly instance: string;

  constructor(ctx: DurableObjectState, env: Env) {
    const instance = crypto.randomUUID();
    const name = ctx.id.name ?? ctx.id.toString();
    const print = (line: string) => env.PRINT.fetch("http://print/", { method: "POST", body: `${name}: ${line}` }).then(() => {});
    const writeFile = defineTool<{ path: string }>({
      name: "write_file",
      description: "Write a file",
      parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
      approval: "always",
      ...(name.startsWith("expiring-") ? { approvalExpiresAfterMs: EXPIRES_AFTER_MS } : {}),
      async execute({ path }) {
        await print(`write ${path}`);
        return `wrote ${path}`;
      },
    });
    const askPerson = definePageTool({
      name: "ask_person",
      description: "Ask the person in the page",
      parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
      replay: "unsafe",
    });
    const faux = fauxProvider({ api: "faux", provider: "faux" });
    const models = createModels();
    models.setProvider(faux.provider);
    const respond = async (messages: readonly Message[]) => {
      const last = messages.at(-1);
      await print(`request after ${last?.role}`);
      if (last?.role === "toolResult") {
        const text = last.content.map((item) => (item.type === "text" ? item.text : "")).join("");
        return fauxAssistantMessage(fauxText(`noted: ${text}`));
      }
      // Objects named `page-…` ask the person in the page (`ask_person`, a page tool) instead.
      const call =
        name.startsWith("page-") || name.startsWith("follow-page-")
          ? fauxToolCall("ask_person", { question: "colour?" }, { id: "call_1" })
          : fauxToolCall("write_file", { path: "a.txt" }, { id: "call_1" });
      return fauxAssistantMessage([call], { stopReason: "toolUse" });
    };
    const brain: FauxResponseFactory = (context) => {
      faux.appendResponses([brain]);
      return respond(context.messages);
    };
    faux.setResponses([brain]);
    super(ctx, env, () => ({
      registry: createRegistry().install(defineExtension({ name: "approvals", tools: [writeFile, askPerson] })),
      models,
      methods: { instance: () => instance },
      powers: ALL_POWERS,
      ...(name.startsWith("follow-") ? { follow: { authorize: () => true, ttlMs: 60_000 } } : {}),
    }));
    this.instance = instance;
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/crash") {
      this.ctx.abort("test: the object crashes while a call waits for a person");
      return new Response("unreachable");
    }
    if (url.pathname !== "/state") return super.fetch(request);
    return this.serve(async (harness) => {
      const root = await harness.root(BACKGROUND);
      return Response.json({
        id: this.ctx.id.toString(),
        instance: this.instance,
        alarm: await this.ctx.storage.getAlarm(),
        tasks: (await harness.storage.listTasks()).map((task) => ({ id: task.id, kind: task.kind, state: task.state })),
        entries: await root.entries(BACKGROUND),
      });
    });
  }
}
