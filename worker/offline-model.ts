import {
  type AssistantMessage,
  type FauxResponseFactory,
  fauxAssistantMessage,
  fauxProvider,
  fauxText,
  fauxToolCall,
  getCurrentSystemMessage,
  type Message,
  type Provider,
  type ToolCall,
  type ToolResultMessage,
} from "@earendil-works/pi-ai";
import { ASK_PERSON, OFFLINE_COMMANDS, OFFLINE_MODEL, OFFLINE_MODEL_LABEL, PROBE } from "./protocol.ts";

/**
 * The offline demo model: pi-ai's faux provider driving a small scripted agent over the file tools. Every
 * answer streams in 4-character chunks at 60 chunks a second (about 240 characters a second), so the story
 * takes about three seconds: long enough to reload in the middle of it. (`tokensPerSecond: 0` streams without
 * pauses, for tests.)
 *
 * The brain answers from the request alone (the committed transcript the harness sends), so a request
 * derived again after a crash gets the same answer, with the same tool call ids.
 */
export function offlineProvider(options: { tokensPerSecond?: number } = {}): Provider {
  const faux = fauxProvider({
    api: "offline-demo",
    provider: OFFLINE_MODEL.provider,
    models: [{ id: OFFLINE_MODEL.id, name: OFFLINE_MODEL_LABEL, input: ["text"], contextWindow: 32_768, maxTokens: 4096 }],
    tokensPerSecond: options.tokensPerSecond ?? 60,
    tokenSize: { min: 1, max: 1 },
  });
  // Each request takes one step from the faux queue; the brain puts itself back for the next one. A few
  // spare steps cover requests that start together (a compaction beside a run).
  const brain: FauxResponseFactory = (context) => {
    faux.appendResponses([brain]);
    return respond(context.messages);
  };
  faux.setResponses([brain, brain, brain, brain]);
  return faux.provider;
}

/** The scripted agent: the answer to a request, from its messages. */
export function respond(messages: readonly Message[]): AssistantMessage {
  const last = messages.at(-1);
  if (last?.role === "toolResult") return afterTools(messages);
  if (last?.role !== "user") return fauxAssistantMessage(help());
  const input = textOf(last.content).trim();
  if (input.startsWith("<conversation>")) return fauxAssistantMessage(summarize(input));
  return onInput(input, messages);
}

export const STORY =
  "Once there was a lighthouse keeper who wrote every turn of the lamp into a ledger. Storms came, the power " +
  "failed, the keeper slept; each time the lamp woke it read the last line of the ledger and went on from " +
  "there, never lighting a beam twice and never skipping one. One night a wave took the lamp mid-turn. When " +
  "it woke, the ledger said the turn had begun but not that it had ended, and the lamp did not pretend to " +
  "know: it wrote down that the turn was interrupted, told the ships, and began the next one. The ships " +
  "trusted it more for that. The keeper says the ledger is the lighthouse; the lamp is only how it shines. " +
  "Reload this tab while I am telling it, and you will see the part you already read kept as an aborted " +
  "answer, a pause for the retry, and then the whole story again.";

function onInput(input: string, messages: readonly Message[]): AssistantMessage {
  const command = input
    .toLowerCase()
    .replace(/[.!?]+$/, "")
    .trim();
  const note = /^(?:note|remember)(?::|\s)\s*(\S[\s\S]*)$/i.exec(input);
  if (note) {
    const text = note[1]!.trim();
    return call(messages, `Adding that to ${PROBE.path}.`, "append", { path: PROBE.path, text: `${text}\n` });
  }
  if (command === PROBE.input) {
    return call(messages, `Running the seed's tool probe: append ${JSON.stringify(PROBE.text)} to ${PROBE.path}.`, PROBE.tool, {
      path: PROBE.path,
      text: PROBE.text,
    });
  }
  if (/^(?:read|show)(?: my| the)? notes?(?:\.txt)?$/.test(command))
    return call(messages, `Reading ${PROBE.path}.`, "read", { path: PROBE.path });
  if (command === "list files" || command === "ls" || command === "files") return call(messages, "Listing the files.", "ls", {});
  if (/^(?:forget|clear)(?: my| the)? notes?(?:\.txt)?$/.test(command))
    return call(messages, `Deleting ${PROBE.path}.`, "rm", { path: PROBE.path });
  if (command === ASK_PERSON.input || command === "choose")
    return call(messages, "Let me ask you.", ASK_PERSON.tool, { question: ASK_PERSON.question, choices: [...ASK_PERSON.choices] });
  if (command === "story" || command === "slow" || command.startsWith("tell me a story")) return fauxAssistantMessage(STORY);
  if (command === "help" || command === "") return fauxAssistantMessage(help());
  return fauxAssistantMessage(`You said ${JSON.stringify(input)}. ${help()}`);
}

function help(): string {
  return [
    `I am the ${OFFLINE_MODEL_LABEL}: a scripted agent that runs in this tab, without a network. Try:`,
    ...OFFLINE_COMMANDS.map(({ say, does }) => `- ${say}: ${does}`),
  ].join("\n");
}

/** A tool call with a deterministic id: `call_<n>`, one more than the highest in the request. */
function call(messages: readonly Message[], preface: string, name: string, args: Record<string, string | string[]>): AssistantMessage {
  const offered = offeredTools(messages);
  if (!offered.has(name)) {
    const available = offered.size > 0 ? [...offered].sort().join(", ") : "none";
    return fauxAssistantMessage(
      `I would use the ${name} tool for that, but this conversation does not offer it (tools offered: ${available}).`,
    );
  }
  const id = `call_${highestCallNumber(messages) + 1}`;
  return fauxAssistantMessage([fauxText(preface), fauxToolCall(name, args, { id })], { stopReason: "toolUse" });
}

function offeredTools(messages: readonly Message[]): Set<string> {
  return new Set((getCurrentSystemMessage([...messages])?.toolsAdded ?? []).map((tool) => tool.name));
}

function highestCallNumber(messages: readonly Message[]): number {
  let highest = 0;
  for (const message of messages) {
    const ids =
      message.role === "assistant"
        ? message.content.filter((block): block is ToolCall => block.type === "toolCall").map((block) => block.id)
        : message.role === "toolResult"
          ? [message.toolCallId]
          : [];
    for (const id of ids) {
      const match = /^call_(\d+)$/.exec(id);
      if (match) highest = Math.max(highest, Number(match[1]));
    }
  }
  return highest;
}

/** The answer after a tool round: what each call returned, in call order. */
function afterTools(messages: readonly Message[]): AssistantMessage {
  let index = messages.length - 1;
  while (index >= 0 && messages[index]!.role !== "assistant") index--;
  const assistant = messages[index] as AssistantMessage | undefined;
  const calls = new Map(
    (assistant?.content ?? []).filter((block): block is ToolCall => block.type === "toolCall").map((block) => [block.id, block]),
  );
  const results = messages.slice(index + 1).filter((message): message is ToolResultMessage => message.role === "toolResult");
  return fauxAssistantMessage(results.map((result) => describe(result, calls.get(result.toolCallId))).join("\n\n"));
}

const HARNESS_ERROR = /^<harness>\n\[error\] ([\s\S]*)\n<\/harness>$/;

function describe(result: ToolResultMessage, toolCall: ToolCall | undefined): string {
  const name = result.toolName;
  const args = (toolCall?.arguments ?? {}) as Record<string, unknown>;
  const path = typeof args.path === "string" ? args.path : PROBE.path;
  const texts = result.content.filter((item) => item.type === "text").map((item) => item.text);
  const harness = texts.map((text) => HARNESS_ERROR.exec(text)?.[1]).find((message) => message !== undefined);
  const output = texts.filter((text) => !HARNESS_ERROR.test(text)).join("");
  if (result.isError) {
    if (harness?.includes("was interrupted")) {
      return (
        `The ${name} call was cut off by a crash and may have partially run, so it was not run again. ` +
        `The harness says: "${harness}".` +
        (output ? ` Before the cut it had reported ${JSON.stringify(output)}.` : "") +
        (name === "append" || name === PROBE.tool || name === "write" || name === "edit" || name === "rm"
          ? ` Say "read notes" or "list files" to see what it left.`
          : "")
      );
    }
    if (harness?.includes("No file")) return `There is no ${path} yet. Add a line with "note <text>".`;
    // A denial (a person, the approval rule or the expiry): the tool never ran, and the turn goes on.
    const denied = harness === undefined ? undefined : /^Tool \S+ was not run: ([\s\S]*)$/.exec(harness)?.[1];
    if (denied !== undefined) return `I did not run ${name}: ${denied}. ${path} is as it was.`;
    return `The ${name} call failed: ${harness ?? output}`;
  }
  switch (name) {
    case "append":
      return `Added ${JSON.stringify(String(args.text ?? "").trim())} to ${path}.`;
    case PROBE.tool:
      return `Appended ${JSON.stringify(String(args.text ?? ""))} to ${path}; the tool answered ${JSON.stringify(output)}.`;
    case "read":
      return output === "" ? `${path} is empty.` : `${path} holds:\n${output}`;
    case "ls":
      return output === "(no files)" ? "There are no files yet." : `The files:\n${output}`;
    case "rm":
      return `Deleted ${path}.`;
    case ASK_PERSON.tool:
      return `You chose ${output}.`;
    default:
      return `${name} answered: ${output}`;
  }
}

/** The compaction's summary request: a short account of the conversation it was given. */
function summarize(request: string): string {
  const lines = request.split("\n");
  const inputs = lines.filter((line) => line.startsWith("[User]: ")).map((line) => line.slice("[User]: ".length));
  const calls = lines
    .filter((line) => line.startsWith("[Assistant tool call]: "))
    .map((line) => line.slice("[Assistant tool call]: ".length).split("(")[0]!);
  const counts = new Map<string, number>();
  for (const name of calls) counts.set(name, (counts.get(name) ?? 0) + 1);
  const tools = [...counts].map(([name, count]) => `${name} ×${count}`).join(", ");
  return (
    `The user sent ${inputs.length} message${inputs.length === 1 ? "" : "s"} to the ${OFFLINE_MODEL_LABEL}` +
    (inputs.length > 0 ? `: ${inputs.map((input) => JSON.stringify(input)).join(", ")}` : "") +
    `. Tool calls: ${tools || "none"}.`
  );
}

function textOf(content: string | ReadonlyArray<{ type: string; text?: string }>): string {
  if (typeof content === "string") return content;
  return content.map((item) => (item.type === "text" ? (item.text ?? "") : "")).join("");
}
