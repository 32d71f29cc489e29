import type { ModelRef } from "../types.ts";

/**
 * `pi.generation` (S9): one run of the conversation, turn by turn. A turn is `prepare` (prompt, tools, the
 * cutoff of the context) → `request` (stream the answer; a retryable failure sleeps durably and requests
 * again) → either the answer, which ends the run, or a tool round: the tool tasks are created with the
 * `waiting` state at `tools`, and when they are all terminal the next turn starts at `prepare`.
 */
export type GenerationCheckpoint =
  | { phase: "prepare"; turn: number }
  | { phase: "request"; turn: number; attempt: number; model: ModelRef; cutoff: number }
  | { phase: "tools"; turn: number; assistant: number; tools: number[]; pending: string[] };
export type GenerationResult = { entryId: number };

/**
 * What it takes to create a generation: its kind, version and first checkpoint. The run bookkeeping
 * (runs.ts) starts generations and the generation's phases end runs; keeping the kind apart from the
 * phases lets both depend on this module instead of on each other.
 */
export const GENERATION_KIND = {
  name: "pi.generation",
  version: 1,
  initial: (_input: Record<string, never>): GenerationCheckpoint => ({ phase: "prepare", turn: 1 }),
} as const;
