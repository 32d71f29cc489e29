import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import type { ConversationViewState } from "../src/agent/view/view.ts";
import type { AssistantEntryPayload, SubmissionOutcome, ToolResultEntryPayload } from "../src/index.ts";
import type { Report } from "../src/reports.ts";
import type { EntryRecord } from "../src/storage/records.ts";
import { waitForReady } from "../src/testing/playwright.ts";
import { STORY } from "../worker/offline-model.ts";
import { type DemoWorkerConfig, type ModelChoice, OFFLINE_MODEL, PROBE, type ProviderConfig } from "../worker/protocol.ts";
import { browserPerTest } from "./support/browser";
import { armCrashPoint, crashPointHit, openDemo, query } from "./support/demo";

// The demo worker's agent (worker/) in the demo app's production build, in real Chromium on real OPFS: the
// offline demo model, the seed's tool probe, a model turn cut mid-stream, and provider keys. A reload is
// the crash. The tests talk to the worker through the page's client (`globalThis.pi.client`), as the page
// does, and look at the database through its read-only SQL. Each test cites the rule it proves.

declare global {
  // Test-side state kept in the page between evaluate calls.
  var e2eViews: ConversationViewState[];
  var e2eReports: Report[];
}

const session = browserPerTest();

const INTERRUPTED = `<harness>\n[error] Tool probe was interrupted and may have partially run\n</harness>`;

/** The seed's query over the tool probe (S8, S11). */
const PROBE_QUERY = `SELECT id, kind, status, record ->> '$.restarts' AS restarts,
       record ->> '$.state.checkpoint.phase' AS phase,
       record ->> '$.state.checkpoint.replay' AS replay
FROM tasks ORDER BY id;`;

/**
 * From now on every load of the page in this browser starts the demo worker with `config` merged into the
 * DemoWorkerConfig the page puts in the worker's name (worker/protocol.ts). It stands in for the page's own
 * settings, which the page keeps and passes the same way on every load, so the tests do not depend on how
 * the page lets a person change them.
 */
async function useWorkerConfig(config: DemoWorkerConfig): Promise<void> {
  await session.context.addInitScript((override: DemoWorkerConfig) => {
    const Native = globalThis.Worker;
    globalThis.Worker = class extends Native {
      constructor(url: string | URL, options?: WorkerOptions) {
        let name = options?.name;
        try {
          const parsed: unknown = JSON.parse(name ?? "");
          if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) name = JSON.stringify({ ...parsed, ...override });
        } catch {
          // not the demo's worker config
        }
        super(url, { ...options, ...(name === undefined ? {} : { name }) });
      }
    };
  }, config);
}

/** Opens the demo app (`?paused`: open without starting work) and returns its root conversation on the offline model. */
async function openAgent(search = "?paused"): Promise<{ page: Page; conversationId: number }> {
  const page = await openDemo(session, search);
  await waitForReady(page);
  const conversationId = await page.evaluate(
    (model) => pi.client.rootConversation({ model }),
    `${OFFLINE_MODEL.provider}/${OFFLINE_MODEL.id}`,
  );
  return { page, conversationId };
}

function submit(page: Page, conversationId: number, content: string): Promise<number> {
  return page.evaluate(([id, content]) => pi.client.submit(id, { type: "input", content }), [conversationId, content] as const);
}

function waitForSubmission(page: Page, submissionId: number): Promise<SubmissionOutcome> {
  return page.evaluate((id) => pi.client.waitForSubmission(id), submissionId);
}

/** The reload (the crash): the worker dies wherever it is; the page loads again, still `?paused`. */
async function reload(page: Page): Promise<void> {
  await page.reload();
  await waitForReady(page);
}

/** Starts collecting the page's reports and every committed view of the conversation. */
async function watch(page: Page, conversationId: number): Promise<void> {
  await page.evaluate(async (id) => {
    globalThis.e2eViews = [];
    globalThis.e2eReports = [];
    await pi.client.onReport((report) => globalThis.e2eReports.push(report));
    await pi.client.watchConversation(id, (view) => globalThis.e2eViews.push(view));
  }, conversationId);
}

/** Waits until the conversation's latest view is idle (no run) and returns every view seen so far. */
async function viewsUntilIdle(page: Page): Promise<ConversationViewState[]> {
  await page.waitForFunction(() => {
    const view = globalThis.e2eViews.at(-1);
    return view !== undefined && !view.busy;
  });
  return page.evaluate(() => globalThis.e2eViews);
}

function reports(page: Page): Promise<Report[]> {
  return page.evaluate(() => globalThis.e2eReports);
}

function readFile(page: Page, conversationId: number, path: string): Promise<string> {
  return page.evaluate(([id, path]) => pi.client.call<string>("files.read", id, path), [conversationId, path] as const);
}

/** The committed view as the page gets it (the first callback of a watch). */
function currentView(page: Page, conversationId: number): Promise<ConversationViewState> {
  return page.evaluate(
    (id) => new Promise<ConversationViewState>((resolve) => void pi.client.watchConversation(id, resolve)),
    conversationId,
  );
}

async function probeRows(page: Page) {
  const rows = await query(page, PROBE_QUERY);
  return rows.filter((row) => row.kind === "pi.generation" || row.kind === "pi.tool");
}

async function taskRecord(page: Page, id: number) {
  const [row] = await query(page, "SELECT record FROM tasks WHERE id = ?", id);
  return JSON.parse(String(row!.record));
}

const toolResults = (entries: readonly EntryRecord[]) =>
  entries
    .filter((entry) => entry.kind === "pi.tool-result")
    .map((entry) => ({ id: entry.id, ...(entry.payload as unknown as ToolResultEntryPayload) }));
const assistants = (entries: readonly EntryRecord[]) =>
  entries
    .filter((entry) => entry.kind === "pi.assistant")
    .map((entry) => {
      const { message } = entry.payload as unknown as AssistantEntryPayload;
      const text = message.content.map((block) => (block.type === "text" ? block.text : `[${block.type}]`)).join("");
      return { id: entry.id, stopReason: message.stopReason, text, timestamp: message.timestamp };
    });
const texts = (content: ReadonlyArray<{ type: string; text?: string }>) =>
  content.map((item) => (item.type === "text" ? item.text : `[${item.type}]`));

/**
 * The seed's tool probe up to the cut: "probe" makes the offline model call `probe` (notes.txt, hello); the
 * tool appends, outputs `working\n`, and the worker stops right after that output was persisted (S8: within
 * `persistWithinMs`); then the tab reloads.
 */
async function cutTheProbe() {
  const { page, conversationId } = await openAgent();
  await armCrashPoint(page, "tool:output-persisted");
  const submissionId = await submit(page, conversationId, PROBE.input);
  const hit = await crashPointHit(page);
  expect(hit).toMatchObject({ name: "tool:output-persisted", taskKind: "pi.tool", conversationId });
  // The tool touched the world before the cut.
  expect(await readFile(page, conversationId, PROBE.path)).toBe(PROBE.text);
  const [generation] = (await probeRows(page)).filter((row) => row.kind === "pi.generation");
  await reload(page);
  return { page, conversationId, submissionId, toolId: hit.taskId, generationId: Number(generation!.id) };
}

describe("S8 the seed's tool probe in the demo worker", () => {
  it("S8 replay unsafe: after a reload mid-tool the tool is not run again; the model gets the persisted output and the interruption, and answers", async () => {
    await useWorkerConfig({ probeReplay: "unsafe" });
    const { page, conversationId, submissionId, toolId, generationId } = await cutTheProbe();

    // Before anything runs again (the page opened `?paused`): the seed's table after open.
    expect(await probeRows(page)).toEqual([
      { id: generationId, kind: "pi.generation", status: "waiting", restarts: null, phase: "tools", replay: null },
      { id: toolId, kind: "pi.tool", status: "pending", restarts: 1, phase: "execute", replay: "unsafe" },
    ]);

    await watch(page, conversationId);
    await page.evaluate(() => pi.client.resume());
    const outcome = await waitForSubmission(page, submissionId);
    const views = await viewsUntilIdle(page);
    const entries = views.at(-1)!.entries;

    expect(await readFile(page, conversationId, PROBE.path)).toBe(PROBE.text); // one hello line: not run again
    const [result, ...more] = toolResults(entries);
    expect(more).toEqual([]);
    expect(result!.message).toMatchObject({ toolName: PROBE.tool, toolCallId: "call_1", isError: true });
    expect(result!.message.content).toEqual([
      { type: "text", text: PROBE.output },
      { type: "text", text: INTERRUPTED },
    ]);
    expect(result!.code).toBe("interrupted");
    expect((await taskRecord(page, toolId)).state).toEqual({
      status: "terminal",
      outcome: {
        status: "failed",
        error: { message: "Tool probe was interrupted and may have partially run" },
        result: { entryId: result!.id },
      },
    });
    expect(await reports(page)).toContainEqual(
      expect.objectContaining({ kind: "task_interrupted", taskId: toolId, taskKind: "pi.tool", conversationId, reason: "interrupted" }),
    );

    // The agent answered after the result, from a request that contained it (the offline model quotes it).
    expect(outcome).toMatchObject({ status: "done" });
    const answer = assistants(entries).at(-1)!;
    expect(answer.id).toBeGreaterThan(result!.id);
    expect(answer.stopReason).toBe("stop");
    expect(answer.text).toContain('The harness says: "Tool probe was interrupted and may have partially run"');
    expect(answer.text).toContain(`Before the cut it had reported ${JSON.stringify(PROBE.output)}`);
    expect(outcome.status === "done" && outcome.answer?.text).toBe(answer.text);
  });

  it("S8 replay safe (declared then and now): the reload reruns the tool, so notes.txt has two lines and the result is appended", async () => {
    await useWorkerConfig({ probeReplay: "safe" });
    const { page, conversationId, submissionId, toolId, generationId } = await cutTheProbe();

    expect(await probeRows(page)).toEqual([
      { id: generationId, kind: "pi.generation", status: "waiting", restarts: null, phase: "tools", replay: null },
      { id: toolId, kind: "pi.tool", status: "pending", restarts: 1, phase: "execute", replay: "safe" },
    ]);

    await watch(page, conversationId);
    await page.evaluate(() => pi.client.resume());
    const outcome = await waitForSubmission(page, submissionId);
    const entries = (await viewsUntilIdle(page)).at(-1)!.entries;

    expect(await readFile(page, conversationId, PROBE.path)).toBe(PROBE.text.repeat(2));
    const [result, ...more] = toolResults(entries);
    expect(more).toEqual([]);
    expect(result!.message).toMatchObject({ toolName: PROBE.tool, toolCallId: "call_1", isError: false });
    expect(result!.message.content).toEqual([{ type: "text", text: PROBE.result }]);
    expect(result!.code).toBeUndefined();
    expect((await taskRecord(page, toolId)).state).toEqual({
      status: "terminal",
      outcome: { status: "completed", result: { entryId: result!.id } },
    });
    expect((await reports(page)).filter((report) => report.kind === "task_interrupted")).toEqual([]);
    expect(outcome).toMatchObject({ status: "done" });
    expect(assistants(entries).at(-1)!.text).toContain(`the tool answered ${JSON.stringify(PROBE.result)}`);
  });
});

/**
 * A long answer ("story") cut by a reload right after a partial of it was persisted (S9: within
 * `persistWithinMs`); the page comes back `?paused`. Returns the partial the crash left.
 */
async function cutTheStory() {
  const { page, conversationId } = await openAgent();
  await armCrashPoint(page, "generation:streaming");
  const submissionId = await submit(page, conversationId, "story");
  const hit = await crashPointHit(page);
  expect(hit).toMatchObject({ name: "generation:streaming", taskKind: "pi.generation", conversationId });
  await reload(page);

  const cut = await taskRecord(page, hit.taskId);
  expect(cut.state).toMatchObject({ status: "pending", checkpoint: { phase: "request", attempt: 1 } });
  expect(cut.restarts).toBe(1);
  const partial = (await currentView(page, conversationId)).live.generation?.message;
  const partialText = texts(partial?.content ?? []).join("");
  expect(partialText.length).toBeGreaterThan(0);
  expect(STORY.startsWith(partialText) && partialText.length < STORY.length).toBe(true);
  return { page, conversationId, submissionId, generationId: hit.taskId, partialText };
}

describe("S9 a model answer cut by a reload mid-stream", () => {
  it("S9 the attempt counts as failed: the partial becomes an aborted entry, the retry waits its backoff, then the whole answer arrives", async () => {
    await useWorkerConfig({ settings: { retry: { baseDelayMs: 300 } } });
    const { page, conversationId, submissionId, generationId, partialText } = await cutTheStory();

    await watch(page, conversationId);
    await page.evaluate(() => pi.client.resume());
    const outcome = await waitForSubmission(page, submissionId);
    const views = await viewsUntilIdle(page);

    expect(outcome).toMatchObject({ status: "done", answer: { text: STORY } });
    const answers = assistants(views.at(-1)!.entries);
    expect(answers.map(({ stopReason, text }) => [stopReason, text])).toEqual([
      ["aborted", partialText],
      ["stop", STORY],
    ]);
    // Not resent at once: a durable sleep until the backoff was over, then attempt 2.
    const retry = views.map((view) => view.live.generation).find((generation) => generation?.retry !== undefined);
    expect(retry).toMatchObject({ attempt: 2, retry: { error: "Attempt 1 of the model request was cut off while in flight." } });
    expect(answers[1]!.timestamp).toBeGreaterThanOrEqual(retry!.retry!.at);
    expect((await taskRecord(page, generationId)).state).toMatchObject({ status: "terminal", outcome: { status: "completed" } });
    expect((await reports(page)).filter((report) => report.kind === "task_interrupted")).toEqual([]);
  });

  it("S9 with retry.maxRetries 0: runFailure interrupted, the input unanswered (interrupted), task_interrupted reported", async () => {
    await useWorkerConfig({ settings: { retry: { maxRetries: 0 } } });
    const { page, conversationId, submissionId, generationId, partialText } = await cutTheStory();

    await watch(page, conversationId);
    await page.evaluate(() => pi.client.resume());
    const outcome = await waitForSubmission(page, submissionId);
    const view = (await viewsUntilIdle(page)).at(-1)!;

    expect(outcome).toMatchObject({ status: "unanswered", reason: "interrupted" });
    expect(view.live.runFailure).toMatchObject({ taskId: generationId, reason: "interrupted" });
    expect(view.live.run).toBeUndefined();
    expect(assistants(view.entries).map(({ stopReason, text }) => [stopReason, text])).toEqual([["aborted", partialText]]);
    expect(await reports(page)).toContainEqual(
      expect.objectContaining({
        kind: "task_interrupted",
        taskId: generationId,
        taskKind: "pi.generation",
        conversationId,
        reason: "interrupted",
      }),
    );
    expect((await taskRecord(page, generationId)).state).toMatchObject({
      status: "terminal",
      outcome: { status: "failed", error: { detail: { reason: "interrupted" } } },
    });
  });
});

/** A local OpenAI-compatible endpoint (Chat Completions, streamed) that answers every request with `answer`. */
async function startEndpoint(answer: string) {
  const requests: Array<{ authorization: string | undefined; body: { model?: string } }> = [];
  const read = async (request: IncomingMessage) => {
    let body = "";
    for await (const chunk of request) body += chunk;
    return body;
  };
  const server = createServer(async (request, response) => {
    // The page's origin differs (another port): a real endpoint has to allow it too (CORS).
    response.setHeader("Access-Control-Allow-Origin", "*");
    response.setHeader("Access-Control-Allow-Headers", request.headers["access-control-request-headers"] ?? "*");
    response.setHeader("Access-Control-Allow-Methods", "POST, OPTIONS");
    if (request.method === "OPTIONS") return void response.writeHead(204).end();
    if (request.method !== "POST" || !request.url?.endsWith("/chat/completions")) return void response.writeHead(404).end();
    requests.push({ authorization: request.headers.authorization, body: JSON.parse(await read(request)) });
    response.writeHead(200, { "Content-Type": "text/event-stream" });
    const chunk = (delta: object, finish: string | null) =>
      `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "mock-model", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    response.end(`${chunk({ role: "assistant", content: answer }, null) + chunk({}, "stop")}data: [DONE]\n\n`);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    close: () => new Promise<void>((done) => server.close(() => done())),
  };
}

/** Every file in this origin's OPFS (the database pool, its journal, the conversations' files) with its bytes. */
async function opfsFiles(page: Page): Promise<Array<{ path: string; base64: string }>> {
  return page.evaluate(async () => {
    const files: Array<{ path: string; base64: string }> = [];
    const walk = async (directory: FileSystemDirectoryHandle, prefix: string): Promise<void> => {
      for await (const [name, handle] of directory as unknown as AsyncIterable<[string, FileSystemHandle]>) {
        if (handle.kind === "directory") {
          await walk(handle as FileSystemDirectoryHandle, `${prefix}${name}/`);
          continue;
        }
        const bytes = new Uint8Array(await (await (handle as FileSystemFileHandle).getFile()).arrayBuffer());
        let binary = "";
        for (const byte of bytes) binary += String.fromCharCode(byte);
        files.push({ path: `${prefix}${name}`, base64: btoa(binary) });
      }
    };
    await walk(await navigator.storage.getDirectory(), "/");
    return files;
  });
}

describe("provider keys", () => {
  it("issue 5: configured providers' keys are used for their requests but never enter the database", async () => {
    const answer = "Hello from the local endpoint.";
    const endpoint = await startEndpoint(answer);
    try {
      const keys = {
        compatible: `sk-local-${crypto.randomUUID()}`,
        openai: `sk-openai-${crypto.randomUUID()}`,
        anthropic: `sk-ant-${crypto.randomUUID()}`,
      };
      // The built-in providers' hosts, answered here: each request is recorded and refused (400, not retried).
      const refusal = "mock provider: requests are recorded, not answered";
      const hosted: Array<{ url: string; headers: Record<string, string> }> = [];
      await session.context.route(/^https:\/\/api\.(openai|anthropic)\.com\//, async (route) => {
        hosted.push({ url: route.request().url(), headers: route.request().headers() });
        await route.fulfill({
          status: 400,
          contentType: "application/json",
          headers: { "Access-Control-Allow-Origin": "*" },
          body: JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: refusal } }),
        });
      });
      const { page } = await openAgent("");
      const configure = (config: ProviderConfig) =>
        page.evaluate((config) => pi.client.call<ModelChoice[]>("models.configure", config), config);
      await configure({ kind: "openai", apiKey: keys.openai, model: "gpt-4o-mini" });
      await configure({ kind: "anthropic", apiKey: keys.anthropic, model: "claude-sonnet-4-5" });
      const choices = await configure({
        kind: "openai-compatible",
        baseUrl: endpoint.baseUrl,
        apiKey: keys.compatible,
        model: "mock-model",
      });
      expect(choices).toEqual([
        { ...OFFLINE_MODEL, label: "offline demo model", offline: true },
        { provider: "openai", id: "gpt-4o-mini", label: "OpenAI gpt-4o-mini", offline: false },
        { provider: "anthropic", id: "claude-sonnet-4-5", label: "Anthropic claude-sonnet-4-5", offline: false },
        { provider: "openai-compatible", id: "mock-model", label: `mock-model at ${endpoint.baseUrl}`, offline: false },
      ]);
      const ask = async (model: string) => {
        const conversationId = await page.evaluate((model) => pi.client.createConversation({ model }), model);
        return waitForSubmission(page, await submit(page, conversationId, "hello"));
      };

      // Each key went with its provider's request, from the worker's memory.
      expect(await ask("openai-compatible/mock-model")).toMatchObject({ status: "done", answer: { text: answer } });
      expect(endpoint.requests).toEqual([
        { authorization: `Bearer ${keys.compatible}`, body: expect.objectContaining({ model: "mock-model" }) },
      ]);
      expect(await ask("openai/gpt-4o-mini")).toMatchObject({ status: "unanswered", reason: "model_error" });
      expect(await ask("anthropic/claude-sonnet-4-5")).toMatchObject({ status: "unanswered", reason: "model_error" });
      expect(hosted.map(({ url, headers }) => [new URL(url).host, headers.authorization ?? headers["x-api-key"]])).toEqual([
        ["api.openai.com", `Bearer ${keys.openai}`],
        ["api.anthropic.com", keys.anthropic],
      ]);

      const image = Buffer.from(
        await page.evaluate(async () => {
          const bytes = await pi.client.exportDatabase();
          let binary = "";
          for (const byte of bytes) binary += String.fromCharCode(byte);
          return btoa(binary);
        }),
        "base64",
      );
      // The search finds what the turns stored (plain UTF-8: answers, provider ids, the providers' error
      // messages), so finding no key means there is none.
      expect(image.includes(answer)).toBe(true);
      expect(image.includes(refusal)).toBe(true);
      for (const provider of ["openai-compatible", "openai", "anthropic"]) expect(image.includes(`"provider":"${provider}"`)).toBe(true);
      for (const key of Object.values(keys)) expect(image.includes(key)).toBe(false);

      // Nor anywhere in OPFS once the worker is gone (its journal, free pages, the pool's other files).
      await page.evaluate(() => pi.client.terminate());
      let files: Awaited<ReturnType<typeof opfsFiles>> | undefined;
      // Until the dead worker's file handles are released, reading a pool file can fail: wait for a clean read.
      await expect.poll(async () => (files = await opfsFiles(page).catch(() => undefined)) !== undefined, { timeout: 15_000 }).toBe(true);
      const bytes = files!.map(({ path, base64 }) => ({ path, bytes: Buffer.from(base64, "base64") }));
      expect(bytes.some((file) => file.bytes.includes(answer))).toBe(true);
      expect(bytes.filter((file) => Object.values(keys).some((key) => file.bytes.includes(key))).map((file) => file.path)).toEqual([]);
    } finally {
      await endpoint.close();
    }
  });
});
