import {
  type AnyTool,
  type ApprovalRule,
  appendFileTool,
  defineExtension,
  definePageTool,
  defineTool,
  type ExecutionEnv,
  editFileTool,
  listFilesTool,
  readFileTool,
  removeFileTool,
  writeFileTool,
} from "../src/index.ts";
import { ASK_PERSON, askBeforeWriting, PROBE } from "./protocol.ts";

/**
 * The seed's probe tool, as the demo's `probe`: it appends the text, reports `working\n`, and takes a few
 * seconds before it answers `appended` — the window in which a reload cuts it off after it touched the file.
 * Notes go through the library's `append`, which answers at once.
 * Its replay policy comes from the page (`DemoWorkerConfig.probeReplay`) on every load, so recovery compares
 * the policy declared when it started with the one declared now (S8).
 */
export function probeTool(replay: "safe" | "unsafe", waitMs: number = PROBE.waitMs): AnyTool {
  return defineTool<{ path: string; text: string }>({
    name: PROBE.tool,
    description: `The seed's tool probe: append text to a file, report "working", then take ${waitMs / 1000} s to answer.`,
    parameters: {
      type: "object",
      properties: {
        path: { type: "string", description: "A path relative to the conversation's files, e.g. notes.txt" },
        text: { type: "string" },
      },
      required: ["path", "text"],
      additionalProperties: false,
    },
    replay,
    async execute({ path, text }, api, context) {
      await (await api.env<ExecutionEnv>()).append(path, text, context);
      api.output(PROBE.output);
      await delay(waitMs, context.abortSignal);
      return PROBE.result;
    },
  });
}

/**
 * The approval rule of every tool that changes a file: a person decides while the switch is on, otherwise the
 * rule approves. It reads only committed entries, so running it again after a crash gives the same verdict.
 */
export const askBeforeWritingRule: ApprovalRule = async (call) =>
  askBeforeWriting(await call.entries()) ? "user-approval" : { approved: true, reason: "ask before writing files is off" };

/** `tool`, asking before it writes while the switch is on. */
function asking(tool: AnyTool): AnyTool {
  return defineTool({ ...tool, approval: askBeforeWritingRule });
}

/** The agent's tools over the conversation's OPFS files: the library's, and the seed's probe; the ones that write ask first when told to. */
export function filesExtension(probeReplay: "safe" | "unsafe", probeWaitMs: number = PROBE.waitMs) {
  return defineExtension({
    name: "demo-files",
    tools: [
      readFileTool,
      listFilesTool,
      ...[writeFileTool, editFileTool, appendFileTool, removeFileTool, probeTool(probeReplay, probeWaitMs)].map(asking),
    ],
    instructions:
      "You are a small agent running in a browser tab. Each conversation has its own files; use the tools read, ls, " +
      "write, edit, append and rm on them (probe is the seed's slow append, for reload demos). A tool result that says a call was interrupted means the tab reloaded " +
      "while it ran: the call may have partially run, so check before doing it again.",
  });
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first (a close or an abort). */
function delay(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** "Ask the person": declared here, run by a tab (web/src/chat/ask-person.ts). */
export const askPersonTool = definePageTool({
  name: ASK_PERSON.tool,
  description: "Asks the person a question with a few choices, in their tab; returns the choice they picked.",
  parameters: {
    type: "object",
    properties: { question: { type: "string" }, choices: { type: "array", items: { type: "string" }, minItems: 1 } },
    required: ["question", "choices"],
    additionalProperties: false,
  },
});

/** The demo's page tools. */
export const pageToolsExtension = defineExtension({ name: "demo-page-tools", tools: [askPersonTool] });
