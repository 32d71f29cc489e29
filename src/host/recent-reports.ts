/**
 * The host's reports (a task faulted or interrupted, an error): shaped for the wire (an error as data), sent to every
 * listener, and the last `RECENT_REPORTS` kept for a listener that subscribes late. Moved out of host.ts.
 */

import { safely } from "../base/safely.ts";
import type { Report } from "../reports.ts";
import { Listeners } from "./listeners.ts";
import type { Unsubscribe } from "./protocol.ts";
import { errorShape } from "./status-parts.ts";

/** Keeps at most this many reports for a listener that subscribes late. */
const RECENT_REPORTS = 200;

export class RecentReports {
  readonly #listeners = new Listeners<Report>();
  readonly #recent: Report[] = [];

  get size(): number {
    return this.#listeners.size;
  }

  /** `HarnessOptions.onReport`: keeps and sends one report. */
  readonly report = (report: Report): void => {
    const shaped = report.kind === "error" ? { ...report, error: errorShape(report.error) } : report;
    this.#recent.push(shaped);
    if (this.#recent.length > RECENT_REPORTS) this.#recent.shift();
    this.#listeners.emit(shaped);
  };

  /** Sends `listener` the recent reports, then each new one. */
  add(listener: (report: Report) => void): Unsubscribe {
    const unsubscribe = this.#listeners.add(listener);
    for (const report of this.#recent) safely(() => listener(report));
    return unsubscribe;
  }
}
