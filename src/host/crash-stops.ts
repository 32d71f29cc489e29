/**
 * The host's crash points (`armCrashPoint`, for crash tests): the phase that reaches the armed point stops there and
 * the test is told; it crashes the host next. Only a clean close ends the stop (a close waits for every running phase,
 * so it would wait for ever otherwise). Moved out of host.ts.
 */
import type { HarnessOptions } from "../harness.ts";
import type { CrashPointHit } from "./protocol.ts";

export class CrashStops {
  #armed: { name: string; reached: (hit: CrashPointHit) => void } | undefined;
  /** Phases stopped at a crash point, waiting for the test to crash the host; a clean close ends them. */
  readonly #stopped = new Set<(error: unknown) => void>();

  /** `HarnessOptions.crashPoint`: stops a phase at the armed point. */
  readonly stop: NonNullable<HarnessOptions["crashPoint"]> = async (name, at) => {
    if (this.#armed?.name !== name) return;
    const { reached } = this.#armed;
    this.#armed = undefined;
    reached({ name, ...at });
    await new Promise<never>((_, reject) => this.#stopped.add(reject));
  };

  /** Resolves when a phase reaches `name` (the one armed point: arming again replaces it). */
  arm(name: string): Promise<CrashPointHit> {
    return new Promise<CrashPointHit>((reached) => (this.#armed = { name, reached }));
  }

  disarm(): void {
    this.#armed = undefined;
  }

  /** A clean close: every stopped phase ends with `error`. */
  end(error: unknown): void {
    for (const end of this.#stopped) end(error);
    this.#stopped.clear();
  }
}
