import type { AssistantMessage } from "@earendil-works/pi-ai";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LiveView } from "../src/agent/types.ts";
import { type ConversationViewState, ConversationViewStore, type ConversationViewUpdate, coalesceLiveFrames } from "../src/index.ts";
import { manualPace } from "./manual-pace.ts";

// The live-frame sweep (issue 21): random programs of a streaming answer and streaming tools, with commits that
// persist the text, start another attempt or end a tool, each subscription's live frames dropped, duplicated
// and reordered (held back past later frames and commits) on their way to the page, and a second page joining
// mid-stream. Snapshots and commits travel in order (a transport that loses those is a lost connection, and
// the page subscribes again). In every program, at every delivery, on every page: the committed part of the
// view is exactly the committed view; what streams is text the sender really had; once the run's last commit
// arrived the view is the committed view, nothing streaming.

type Step =
  | { kind: "grow"; block: number; text: string }
  | { kind: "block"; type: "text" | "thinking" | "toolCall"; text: string }
  | { kind: "rewrite"; block: number; text: string }
  | { kind: "tool"; taskId: number; text: string; reset: boolean }
  | { kind: "persist" }
  | { kind: "attempt" }
  | { kind: "end-tool"; taskId: number }
  | { kind: "note" }
  | { kind: "join" };

const text = fc.string({ minLength: 1, maxLength: 4 });
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant("grow" as const), block: fc.nat(3), text }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("block" as const),
      type: fc.constantFrom("text" as const, "thinking" as const, "toolCall" as const),
      text,
    }),
  },
  fc.record({ kind: fc.constant("rewrite" as const), block: fc.nat(3), text }),
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant("tool" as const), taskId: fc.integer({ min: 5, max: 6 }), text, reset: fc.boolean() }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("persist" as const) }) },
  fc.record({ kind: fc.constant("attempt" as const) }),
  fc.record({ kind: fc.constant("end-tool" as const), taskId: fc.integer({ min: 5, max: 6 }) }),
  fc.record({ kind: fc.constant("note" as const) }),
  fc.record({ kind: fc.constant("join" as const) }),
);

/** What the transport does to one live frame: deliver it, lose it, deliver it twice, or hold it back past `n` messages. */
type Fate = { kind: "deliver" } | { kind: "drop" } | { kind: "duplicate" } | { kind: "delay"; n: number };
const fate: fc.Arbitrary<Fate> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: "deliver" as const }) },
  { weight: 2, arbitrary: fc.constant({ kind: "drop" as const }) },
  fc.constant({ kind: "duplicate" as const }),
  fc.record({ kind: fc.constant("delay" as const), n: fc.integer({ min: 1, max: 4 }) }),
);

const program = fc.record({
  steps: fc.array(step, { minLength: 1, maxLength: 60, size: "medium" }),
  /** Each page's fates, taken in turn for its frames. */
  fates: fc.tuple(fc.array(fate, { minLength: 1, maxLength: 16 }), fc.array(fate, { minLength: 1, maxLength: 16 })),
});

/** JSON with sorted keys: the same value gives the same text whatever order its keys were written in. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    inner && typeof inner === "object" && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => (a < b ? -1 : 1)))
      : inner,
  );
}

const committedPart = (state: ConversationViewState) => {
  const { streaming: _streaming, ...rest } = state;
  return rest;
};

interface Counts {
  frames: number;
  dropped: number;
  duplicated: number;
  reordered: number;
  joined: number;
}

/** A page: its subscription's coalescer, the lossy transport behind it, and its store. */
class Page {
  readonly store = new ConversationViewStore();
  readonly #fates: Fate[];
  #next = 0;
  readonly #held: Array<{ after: number; update: ConversationViewUpdate }> = [];
  #delivered = 0;
  readonly listen: (update: ConversationViewUpdate) => void;

  constructor(
    fates: Fate[],
    pace: ReturnType<typeof manualPace>,
    readonly counts: Counts,
    readonly check: (page: Page) => void,
  ) {
    this.#fates = fates;
    this.listen = coalesceLiveFrames((update) => this.#transport(update), pace);
  }

  #transport(update: ConversationViewUpdate): void {
    if (update.type !== "live") {
      this.#deliver(update);
      return;
    }
    this.counts.frames++;
    const fate = this.#fates[this.#next++ % this.#fates.length]!;
    if (fate.kind === "drop") this.counts.dropped++;
    else if (fate.kind === "delay") {
      this.counts.reordered++;
      this.#held.push({ after: this.#delivered + fate.n, update });
    } else {
      this.#deliver(update);
      if (fate.kind === "duplicate") {
        this.counts.duplicated++;
        this.#deliver(update);
      }
    }
  }

  #deliver(update: ConversationViewUpdate): void {
    this.store.apply(update);
    this.#delivered++;
    this.check(this);
    for (const held of this.#held.filter((candidate) => candidate.after <= this.#delivered)) {
      this.#held.splice(this.#held.indexOf(held), 1);
      this.#deliver(held.update);
    }
  }

  /** Delivers what is still held back (the transport's late frames). */
  flush(): void {
    for (const held of this.#held.splice(0)) this.#deliver(held.update);
  }
}

/** Runs one program; returns what it sent and did to the frames. */
function runProgram(steps: Step[], fates: [Fate[], Fate[]], counts: Counts): void {
  const pace = manualPace();
  const committed = new ConversationViewStore();
  /** Every answer and tool output the sender had, as JSON: what may stream on a page. */
  const sent = new Set<string>();
  let attempt = 1;
  let content: Array<Record<string, unknown>> = [{ type: "text", text: "" }];
  const outputs = new Map<number, string>();
  const running = new Set([5, 6]);
  let persisted: { message?: AssistantMessage; outputs: Map<number, string> } = { outputs: new Map() };
  let entryId = 100;
  const message = () => ({ role: "assistant", content: structuredClone(content), stopReason: "stop" }) as unknown as AssistantMessage;
  const answer = () => ({ taskId: 1, attempt, message: message() });
  const live = (): LiveView => ({
    run: { taskId: 1, inputs: [1], startedAt: 0 },
    generation: { attempt, ...(persisted.message ? { message: persisted.message } : {}) },
    tools: [5, 6].map((taskId) => ({
      callId: `c${taskId}`,
      name: "t",
      taskId,
      status: running.has(taskId) ? ("running" as const) : ("done" as const),
      ...(persisted.outputs.has(taskId) ? { output: persisted.outputs.get(taskId)! } : {}),
    })),
  });

  const check = (page: Page) => {
    const state = page.store.state!;
    expect(committedPart(state)).toEqual(committedPart(committed.state!));
    if (state.streaming?.answer) expect(sent.has(canonical(["answer", state.streaming.answer]))).toBe(true);
    for (const [taskId, output] of Object.entries(state.streaming?.tools ?? {}))
      expect(sent.has(canonical(["tool", Number(taskId), output]))).toBe(true);
  };
  const pages = [new Page(fates[0], pace, counts, check)];
  const snapshot = (): ConversationViewUpdate => {
    const { hasOlder, ...state } = committedPart(committed.state!);
    return { type: "snapshot", ...state, hasOlder: hasOlder ?? false };
  };
  const commit = (update: ConversationViewUpdate) => {
    committed.apply(update);
    for (const page of pages) page.listen(update);
  };
  const stream = (update: ConversationViewUpdate) => {
    for (const page of pages) page.listen(update);
  };

  committed.apply({
    type: "snapshot",
    conversationId: 1,
    entries: [],
    hasOlder: false,
    inbox: { items: [] },
    usage: { models: {} },
    agent: {},
    busy: true,
    live: live(),
  });
  pages[0]!.listen(snapshot());
  for (const [index, next] of steps.entries()) {
    pace.advanceTo(index * 7); // frames coalesce about every other step
    if (next.kind === "join") {
      if (pages.length > 1) continue;
      counts.joined++;
      const page = new Page(fates[1], pace, counts, check);
      pages.push(page);
      page.listen(snapshot());
      continue;
    }
    if (next.kind === "note") {
      commit({ type: "commit", entries: [{ id: entryId++, conversationId: 1, kind: "app.note", payload: index, at: 0 }] });
      continue;
    }
    if (next.kind === "persist") {
      persisted = { message: message(), outputs: new Map([...outputs].filter(([taskId]) => running.has(taskId))) };
      commit({ type: "commit", live: live() });
      continue;
    }
    if (next.kind === "end-tool") {
      running.delete(next.taskId);
      commit({ type: "commit", live: live() });
      continue;
    }
    if (next.kind === "tool") {
      if (!running.has(next.taskId)) continue;
      const output = (next.reset ? "" : (outputs.get(next.taskId) ?? "")) + next.text;
      outputs.set(next.taskId, output);
      sent.add(canonical(["tool", next.taskId, output]));
      stream({ type: "live", tools: { [next.taskId]: output } });
      continue;
    }
    if (next.kind === "grow") {
      const block = content[next.block % content.length]!;
      if (block.type === "toolCall") block.arguments = { value: `${String((block.arguments as { value: string }).value)}${next.text}` };
      else block[block.type === "text" ? "text" : "thinking"] += next.text;
    } else if (next.kind === "block")
      content.push(
        next.type === "toolCall"
          ? { type: "toolCall", id: `t${content.length}`, name: "t", arguments: { value: next.text } }
          : { type: next.type, [next.type === "text" ? "text" : "thinking"]: next.text },
      );
    else if (next.kind === "rewrite") content[next.block % content.length] = { type: "text", text: next.text };
    else {
      attempt += 1;
      content = [{ type: "text", text: "" }];
      persisted = { outputs: persisted.outputs };
      commit({ type: "commit", live: live() });
    }
    sent.add(canonical(["answer", answer()]));
    stream({ type: "live", answer: answer() });
  }
  pace.advanceTo(steps.length * 7 + 16);
  // The run ends: its answer is an entry, the live document is cleared. Late frames may still arrive after it.
  commit({
    type: "commit",
    entries: [{ id: entryId++, conversationId: 1, kind: "pi.assistant", payload: { message: message() } as never, at: 0 }],
    live: {},
    busy: false,
  });
  for (const page of pages) {
    page.flush();
    expect(page.store.state).toEqual(committed.state);
  }
}

describe("live-frame sweep", () => {
  it("frames dropped, duplicated and reordered, a second page joining mid-stream: the committed part is always exact, what streams is text the sender had, the view converges to the committed view (property)", () => {
    const counts: Counts = { frames: 0, dropped: 0, duplicated: 0, reordered: 0, joined: 0 };
    fc.assert(
      fc.property(program, ({ steps, fates }) => runProgram(steps, fates, counts)),
      { numRuns: 300, seed: 21 },
    );
    console.log(
      `live-frame sweep: 300 programs, ${counts.frames} frames: ${counts.dropped} dropped, ${counts.duplicated} duplicated, ${counts.reordered} reordered; a second page joined in ${counts.joined}`,
    );
    expect(counts.dropped * counts.duplicated * counts.reordered * counts.joined).toBeGreaterThan(0);
  });

  it("S9 a frame held back: the next frame's append is not applied to text it was not built on (the program the sweep shrank to)", () => {
    // A block rewritten ("!") in a frame that arrives late; the frame after it appends to that block. Built on
    // the old block it would show "  " — text the model never wrote.
    const steps: Step[] = [
      { kind: "grow", block: 0, text: " " },
      { kind: "block", type: "text", text: " " },
      { kind: "note" },
      { kind: "rewrite", block: 0, text: "!" },
      { kind: "grow", block: 0, text: " " },
      { kind: "tool", taskId: 5, text: " ", reset: false },
    ];
    const fates: Fate[] = [{ kind: "deliver" }, { kind: "deliver" }, { kind: "delay", n: 1 }, { kind: "deliver" }];
    runProgram(steps, [fates, [{ kind: "deliver" }]], { frames: 0, dropped: 0, duplicated: 0, reordered: 0, joined: 0 });
  });
});
