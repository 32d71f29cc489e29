/**
 * What the object answers in its switch (decisions 0130, 0135, 0139): the instance that handed the lease back to a tab
 * lives on until its alarm ends it (Cloudflare), its own harness drained and closed, its copy service still `holding`
 * that closed host. What the closed host refuses there with `HarnessClosed` is no close a caller should give up on: the
 * next instance follows and answers it (a read from the copy, a keyed write forwarded to the tab under its key). So it
 * is `NotReady` (retryable) — to a tab's push or keyed call on the follow link (object-end.ts), and to every call of a
 * page connected to the object itself (`connectHarness(url)`, `POST /rpc`, RPC; `answeredInSwitch`), whose client sends
 * a call `PROTOCOL` lets it again by itself (src/browser/not-ready-resend.ts). Outside the switch (an app that closed
 * the object's service) `HarnessClosed` keeps its name: final (review of 0130, M1).
 */
import { HarnessClosed, LeaseNotHeld, NotReady, ReadOnlySession } from "../errors.ts";
import { keepCancel } from "../host/pending-subscription.ts";
import { type HarnessService, type HarnessStatus, type MethodName, PROTOCOL } from "../host/protocol.ts";

/**
 * `error` as the caller is answered: `NotReady` when `switching` and the closed host refused with `HarnessClosed` —
 * or, for a page's call (`lapsed`: `answeredInSwitch`), in an instance whose idle lease lapsed (decision 0143), its fence
 * with `LeaseNotHeld` and then the host it reopened read-only with `ReadOnlySession` (advice for the harness's owner, no
 * answer for a page). A tab's push or keyed call on the follow link (object-end.ts) keeps those two as they are: there
 * they judge the caller's epoch, a forged one's final answer (the review of 0143, L1). `again` says what the caller
 * does next. Otherwise the error as it is.
 */
export function switchRefusal(error: unknown, switching: boolean, again: string, lapsed = false): unknown {
  const between = error instanceof HarnessClosed || (lapsed && (error instanceof LeaseNotHeld || error instanceof ReadOnlySession));
  return switching && between ? new NotReady(`the object is between its harnesses: ${again}`) : error;
}

/**
 * Where an object's hand-back stands (`ObjectEnd.switching`): the switch begins with the drain — the harness refuses
 * new work with `HarnessClosed` from the moment it starts stopping, before the lease is released (found probing this
 * decision's change: a page's Send then was lost the same way) — and lasts, once handed back, while no harness is open
 * here. A hand-back refused before its drain (`LeaseNotHeld`) is no switch; one that fails after it ends it with the call.
 */
export class HandBackSwitch {
  #handing = false;
  #handed = false;
  readonly #moved: () => void;

  /** `moved` is told each time the switch may have begun or ended (the page's status says so; decision 0145). */
  constructor(moved: () => void = () => {}) {
    this.#moved = moved;
  }

  /**
   * Runs the hand-back: in the switch from its drain (`draining`, which it calls once its checks let it drain) to its end.
   * A hand-back refused before draining (a forged or stale ask: the harness still open, still the holder) is no switch:
   * the pages' status does not move (0145's review, M1: before, every refused ask showed them `opening` then `ready`,
   * and a page's `usePageTool` let its running tools go at each).
   */
  async during<T>(handBack: (draining: () => void) => Promise<T>): Promise<T> {
    const draining = () => {
      if (this.#handing) return;
      this.#handing = true;
      this.#moved();
    };
    try {
      return await handBack(draining);
    } finally {
      if (this.#handing) {
        this.#handing = false;
        this.#moved();
      }
    }
  }

  /** The lease was released to the tab: the switch lasts until a harness opens here (the next instance's, on Cloudflare). */
  handed(): void {
    this.#handed = true;
    this.#moved();
  }

  /** Whether this place is in its switch; `open`: a harness holds the lease here now. */
  switching(open: boolean): boolean {
    return this.#handing || (this.#handed && !open);
  }
}

type AnyMethod = (...args: unknown[]) => unknown;

/**
 * The object's status as a page is told it in the switch or the lapse (decision 0145): `opening` — not ready, as at
 * the start of an instance, which is what comes next (the next instance opens, follows, and says where the agent runs).
 * Before, the closed or lapsed harness's last `ready` (`runs: "here"`, its old epoch) while the tab already held the
 * next one. A kind every page knows (an older one too): its client waits in `ready()` and its hooks show `opening`.
 * A status without a database (failed, closed) is as it is.
 */
export function statusInSwitch(status: HarnessStatus): HarnessStatus {
  return "database" in status ? { kind: "opening", database: status.database } : status;
}

/**
 * A status listener as pages get it: each status told as `statusInSwitch` while `switching()`, and one that says the
 * same as the last told is not told again (the object tells its status again each time the switch moves).
 */
function toldInSwitch(listener: (status: HarnessStatus) => void, switching: () => boolean): (status: HarnessStatus) => void {
  let last: string | undefined;
  return (status) => {
    const shown = switching() ? statusInSwitch(status) : status;
    const text = JSON.stringify(shown);
    if (text === last) return;
    last = text;
    listener(shown);
  };
}

/**
 * `service` as pages connected to the object get it: each method's `HarnessClosed`, thrown or rejected while
 * `switching()` (`ObjectEnd.switching`, read when it fails), is `NotReady`, and its status is `opening` (read at each
 * status: `statusInSwitch`). Nothing is changed otherwise: a call that was answered, and every error outside the switch,
 * reach the page as before; a watch that waits can still be given up.
 */
export function answeredInSwitch(service: HarnessService, switching: () => boolean): HarnessService {
  const answered: Record<string, AnyMethod> = {};
  for (const name of Object.keys(PROTOCOL) as MethodName[]) {
    const method = (service[name] as AnyMethod).bind(service);
    const refused = (error: unknown): never => {
      throw switchRefusal(error, switching(), "ask again (a write under the same key is made once)", true);
    };
    answered[name] = (...args) => {
      try {
        const result = method(...args);
        return result instanceof Promise ? keepCancel(result, result.catch(refused)) : result;
      } catch (error) {
        return refused(error);
      }
    };
  }
  const { status, onStatus } = answered;
  answered.status = () => {
    const now = status!() as HarnessStatus;
    return switching() ? statusInSwitch(now) : now;
  };
  answered.onStatus = (listener, ...rest) => onStatus!(toldInSwitch(listener as (status: HarnessStatus) => void, switching), ...rest);
  return answered as unknown as HarnessService;
}
