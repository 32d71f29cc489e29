/**
 * What one caller may hold at a host at once (decision 0148): its subscriptions, held or still waiting for their
 * answer (a watch of a conversation not come yet waits: decisions 0103, 0107), and its calls waiting for their answers.
 * A caller is one transport's peer: a page's comlink port (`exposeHost`), one socket of a Durable Object, one follower
 * tab at the leading tab (each through `serveMessages`). Without a bound one hostile page could subscribe a million
 * times and grow the host's memory until it died, for every other page too.
 *
 * ```ts
 * const bounds = new CallerBounds(callerLimitsOf({ maxSubscriptions: 256 }));
 * bounds.admitSubscription("watchTasks", heldNow); // TooManySubscriptions at the bound
 * await bounds.call("submit", () => endpoint.call("submit", args)); // TooManyCallsInFlight at the bound
 * ```
 */
import { InvalidSetting, TooManyCallsInFlight, TooManySubscriptions } from "../errors.ts";
import { describeValue } from "../shape.ts";

export interface CallerLimits {
  /**
   * Subscriptions one caller holds at once, waiting ones included (status, reports, tasks, each view and page tools
   * watch). Default 1,024: a page holds tens (one per mounted `useConversation`, `useTasks`, …). Past it a subscribe is
   * `TooManySubscriptions` (not retryable: unsubscribe one first).
   */
  maxSubscriptions: number;
  /**
   * Calls of one caller waiting for their answers at once (`waitForTask`, `waitForSubmission` wait by design; every call
   * waits while the host opens). Default 1,024. Past it a call is `TooManyCallsInFlight` (retryable: nothing ran).
   */
  maxCallsInFlight: number;
}

export const DEFAULT_CALLER_LIMITS: CallerLimits = Object.freeze({ maxSubscriptions: 1_024, maxCallsInFlight: 1_024 });

/**
 * The limits an app gave (`callerLimits`, any part left out keeps its default), checked: each a positive whole number;
 * anything else (0, a fraction, `Infinity`, text, an unknown key) is `InvalidSetting`.
 */
export function callerLimitsOf(given: unknown): CallerLimits {
  if (given === undefined) return DEFAULT_CALLER_LIMITS;
  if (typeof given !== "object" || given === null || Array.isArray(given))
    throw new InvalidSetting(`callerLimits must be an object { maxSubscriptions?, maxCallsInFlight? }; got ${describeValue(given)}.`);
  const limits: Record<string, number> = { ...DEFAULT_CALLER_LIMITS };
  for (const [name, value] of Object.entries(given)) {
    if (!Object.hasOwn(DEFAULT_CALLER_LIMITS, name))
      throw new InvalidSetting(`callerLimits has no setting ${JSON.stringify(name)}: use maxSubscriptions or maxCallsInFlight.`);
    if (value === undefined) continue;
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1)
      throw new InvalidSetting(
        `callerLimits.${name} must be a positive whole number; got ${describeValue(value)}. Leave it out for the default.`,
      );
    limits[name] = value;
  }
  return Object.freeze(limits) as unknown as CallerLimits;
}

/** `callerLimitsOf(given)`, or the defaults with the refusal kept for the host's open to fail with (its status says why). */
export function settledCallerLimits(given: unknown): { limits: CallerLimits; refused?: unknown } {
  try {
    return { limits: callerLimitsOf(given) };
  } catch (refused) {
    return { limits: DEFAULT_CALLER_LIMITS, refused };
  }
}

/** One caller's count of calls in flight, and the check of its subscriptions against its limits. */
export class CallerBounds {
  readonly limits: CallerLimits;
  #calls = 0;

  constructor(limits: CallerLimits = DEFAULT_CALLER_LIMITS) {
    this.limits = limits;
  }

  /** Throws `TooManySubscriptions` (naming `method`) when the caller already holds `held` at its bound. */
  admitSubscription(method: string, held: number): void {
    if (held >= this.limits.maxSubscriptions) throw new TooManySubscriptions(method, this.limits.maxSubscriptions);
  }

  /** Runs `call` counted in flight until it settles; at the bound it rejects with `TooManyCallsInFlight`, not run. */
  async call<T>(method: string, call: () => Promise<T>): Promise<T> {
    if (this.#calls >= this.limits.maxCallsInFlight) throw new TooManyCallsInFlight(method, this.limits.maxCallsInFlight);
    this.#calls++;
    try {
      return await call();
    } finally {
      this.#calls--;
    }
  }
}
