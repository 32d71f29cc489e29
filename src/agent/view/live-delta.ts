import type { AssistantMessage } from "../model-types.ts";
import type { LiveView, StreamingAnswer, StreamingView } from "../types.ts";

type Block = AssistantMessage["content"][number];

/**
 * What a live frame says of a partial answer since the frame before it on the same subscription: the blocks
 * before `from` are unchanged, except that block `grown.index` (if any) had `grown.text` appended to its
 * text or thinking at `grown.at` (its length before); `blocks` replace everything from `from` on, in full
 * (a new block, a tool call's arguments); `fields` are the message's other fields, when they changed.
 */
export interface AnswerDelta {
  taskId: number;
  attempt: number;
  /** How many content blocks the receiver holds before this frame (a check: a frame for another base is dropped). */
  size: number;
  grown?: { index: number; at: number; text: string };
  from: number;
  blocks: Block[];
  fields?: Omit<AssistantMessage, "content">;
}

/** A tool's output: in full, or `text` appended at `at` (the length the receiver holds). */
export type ToolFrame = string | { at: number; text: string };

/**
 * A live frame as it travels: each part in full (`StreamingView`: the first frame of an answer attempt or a
 * tool, and after a reset), or only what is new since the subscription's frame before.
 */
export interface LiveFrame {
  /**
   * The frame's place on its subscription (1 for the first after the snapshot). A receiver that sees one
   * missing, or an old one again, keeps no part it cannot tell is current (see `LiveFrameDecoder`).
   */
  seq?: number;
  answer?: StreamingAnswer | AnswerDelta;
  tools?: Readonly<Record<string, ToolFrame>>;
}

/** The field of a block that grows while it streams. */
function grows(block: Block): "text" | "thinking" | undefined {
  return block.type === "text" ? "text" : block.type === "thinking" ? "thinking" : undefined;
}

/** A block as the sender remembers it: what must stay equal (`key`) and what may only grow (`text`). */
interface SentBlock {
  key: string;
  text: string;
}

function remember(block: Block): SentBlock {
  const field = grows(block);
  if (!field) return { key: JSON.stringify(block), text: "" };
  const { [field]: text, ...rest } = block as Block & Record<string, string>;
  return { key: JSON.stringify(rest), text: text ?? "" };
}

/**
 * A tool whose slot the committed view shows as done or no longer has streams no more: both ends forget its
 * output on the same commit update, so they keep agreeing on what the receiver holds.
 */
function endedTools(tools: Map<string, unknown>, live: LiveView): void {
  const running = new Set((live.tools ?? []).filter((slot) => slot.status !== "done").map((slot) => String(slot.taskId)));
  for (const taskId of tools.keys()) if (!running.has(taskId)) tools.delete(taskId);
}

/**
 * The sending end of one subscription: turns the newest live text into a frame of what the receiver does not
 * have yet. Each part goes in full the first time, and whenever it is not an extension of what was sent
 * (another attempt, a tool that started over, a block that changed other than by growing).
 */
export class LiveFrameEncoder {
  #answer: { taskId: number; attempt: number; blocks: SentBlock[]; fields: string } | undefined;
  readonly #tools = new Map<string, string>();
  #seq = 0;

  /** A snapshot starts the subscription over; a commit's `live` ends tools (see `endedTools`). */
  committed(update: { type: "snapshot" | "commit"; live?: LiveView }): void {
    if (update.type === "snapshot") {
      this.#answer = undefined;
      this.#tools.clear();
      this.#seq = 0;
    }
    if (update.live) endedTools(this.#tools, update.live);
  }

  /** The frame that brings the receiver to `view`; undefined when it already has all of it. */
  encode(view: StreamingView): LiveFrame | undefined {
    const answer = view.answer ? this.#encodeAnswer(view.answer) : undefined;
    let tools: Record<string, ToolFrame> | undefined;
    for (const [taskId, output] of Object.entries(view.tools ?? {})) {
      const sent = this.#tools.get(taskId);
      if (sent === output) continue;
      this.#tools.set(taskId, output);
      tools ??= {};
      tools[taskId] = sent !== undefined && output.startsWith(sent) ? { at: sent.length, text: output.slice(sent.length) } : output;
    }
    if (!answer && !tools) return undefined;
    return { seq: ++this.#seq, ...(answer ? { answer } : {}), ...(tools ? { tools } : {}) };
  }

  #encodeAnswer(answer: StreamingAnswer): StreamingAnswer | AnswerDelta | undefined {
    const { content, ...rest } = answer.message;
    const blocks = content.map(remember);
    const fields = JSON.stringify(rest);
    const sent = this.#answer;
    this.#answer = { taskId: answer.taskId, attempt: answer.attempt, blocks, fields };
    if (!sent || sent.taskId !== answer.taskId || sent.attempt !== answer.attempt) return answer;
    let from = 0;
    while (from < sent.blocks.length && from < blocks.length && sameBlock(sent.blocks[from]!, blocks[from]!)) from += 1;
    let grown: AnswerDelta["grown"];
    const before = sent.blocks[from];
    const now = blocks[from];
    if (before && now && before.key === now.key && now.text.startsWith(before.text)) {
      grown = { index: from, at: before.text.length, text: now.text.slice(before.text.length) };
      from += 1;
    }
    const changedFields = fields !== sent.fields;
    if (!grown && from === blocks.length && from === sent.blocks.length && !changedFields) return undefined;
    return {
      taskId: answer.taskId,
      attempt: answer.attempt,
      size: sent.blocks.length,
      ...(grown ? { grown } : {}),
      from,
      blocks: content.slice(from),
      ...(changedFields ? { fields: rest } : {}),
    };
  }
}

function sameBlock(a: SentBlock, b: SentBlock): boolean {
  return a.key === b.key && a.text === b.text;
}

/**
 * The receiving end of one subscription: what it holds of the live text, kept apart from what it shows (a
 * commit may cover the shown text, and later frames still build on what was received).
 *
 * Should a transport lose, repeat or reorder frames, nothing it shows is text the sender never had: a frame
 * whose `seq` it had already passed changes nothing; after a gap in `seq` it forgets every part it held, so
 * a part applies again only once sent in full (the first frame of another attempt or of a tool that started
 * over) and until then the commits that persist the text carry the view. A part's own check (its block
 * count and text length) cannot see that alone: a lost frame may have changed what a later one builds on.
 */
export class LiveFrameDecoder {
  #answer: StreamingAnswer | undefined;
  readonly #tools = new Map<string, string>();
  /** The last frame's `seq`; undefined when not known (started from `held`), then every frame counts as next. */
  #seq: number | undefined;

  /** Starts from `held` (what was received so far), or from nothing. */
  constructor(held?: StreamingView) {
    this.#answer = held?.answer;
    for (const [taskId, output] of Object.entries(held?.tools ?? {})) this.#tools.set(taskId, output);
  }

  committed(update: { type: "snapshot" | "commit"; live?: LiveView }): void {
    if (update.type === "snapshot") {
      this.#answer = undefined;
      this.#tools.clear();
      this.#seq = 0;
    }
    if (update.live) endedTools(this.#tools, update.live);
  }

  /** The parts of `frame` in full. A part that does not fit what was received (a lost frame) is dropped. */
  decode(frame: LiveFrame): StreamingView {
    if (frame.seq !== undefined && this.#seq !== undefined) {
      if (frame.seq <= this.#seq) return {};
      if (frame.seq > this.#seq + 1) {
        this.#answer = undefined;
        this.#tools.clear();
      }
    }
    if (frame.seq !== undefined) this.#seq = frame.seq;
    let answer: StreamingAnswer | undefined;
    if (frame.answer) {
      answer = "message" in frame.answer ? frame.answer : this.#applyAnswer(frame.answer);
      this.#answer = answer;
    }
    let tools: Record<string, string> | undefined;
    for (const [taskId, part] of Object.entries(frame.tools ?? {})) {
      const held = this.#tools.get(taskId);
      const output = typeof part === "string" ? part : held !== undefined && held.length === part.at ? held + part.text : undefined;
      if (output === undefined) {
        this.#tools.delete(taskId);
        continue;
      }
      this.#tools.set(taskId, output);
      tools ??= {};
      tools[taskId] = output;
    }
    return { ...(answer ? { answer } : {}), ...(tools ? { tools } : {}) };
  }

  #applyAnswer(delta: AnswerDelta): StreamingAnswer | undefined {
    const held = this.#answer;
    if (!held || held.taskId !== delta.taskId || held.attempt !== delta.attempt || held.message.content.length !== delta.size)
      return undefined;
    const content = held.message.content.slice(0, delta.from);
    if (delta.grown) {
      const block = content[delta.grown.index];
      const field = block ? grows(block) : undefined;
      const text = field ? ((block as Block & Record<string, string>)[field] ?? "") : undefined;
      if (!block || !field || text?.length !== delta.grown.at) return undefined;
      content[delta.grown.index] = { ...block, [field]: text + delta.grown.text } as Block;
    }
    content.push(...delta.blocks);
    const { content: _content, ...fields } = held.message;
    return { taskId: delta.taskId, attempt: delta.attempt, message: { ...(delta.fields ?? fields), content } as AssistantMessage };
  }
}
