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
import { type HarnessService, type MethodName, PROTOCOL } from "../host/protocol.ts";

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
 * here. A hand-back that fails (`LeaseNotHeld`: the lease is not this object's) ends it with the call.
 */
export class HandBackSwitch {
  #handing = false;
  #handed = false;

  /** Runs the hand-back: in the switch meanwhile. */
  async during<T>(handBack: () => Promise<T>): Promise<T> {
    this.#handing = true;
    try {
      return await handBack();
    } finally {
      this.#handing = false;
    }
  }

  /** The lease was released to the tab: the switch lasts until a harness opens here (the next instance's, on Cloudflare). */
  handed(): void {
    this.#handed = true;
  }

  /** Whether this place is in its switch; `open`: a harness holds the lease here now. */
  switching(open: boolean): boolean {
    return this.#handing || (this.#handed && !open);
  }
}

type AnyMethod = (...args: unknown[]) => unknown;

/**
 * `service` as pages connected to the object get it: each method's `HarnessClosed`, thrown or rejected while
 * `switching()` (`ObjectEnd.switching`, read when it fails), is `NotReady`. Nothing is changed otherwise: a call that was
 * answered, and every error outside the switch, reach the page as before; a watch that waits can still be given up.
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
  return answered as unknown as HarnessService;
}
