/**
 * The sleepers with an `until`, earliest first (decision 0115): a binary min-heap of `(until, id)`, so the sleep
 * timer finds the earliest sleeper without walking every one. The timer is armed at the end of every drain; with
 * 10,000 tasks asleep the walk it replaces was 10,000 lookups in front of the first resumed step after a reload, and
 * again after every task created or ended.
 *
 * Lazy: `push` adds an entry for every committed sleep with `until` and nothing is ever removed by the caller; an
 * entry is current while `current(id, until)` says that task still sleeps until then (the caller's mirror), and the
 * others are dropped when they come to the top, or all at once when the heap has doubled since it was last cleaned
 * (linear, so constant a push). A sleeper committed asleep again with the same `until` leaves equal entries, which
 * every answer counts once and the clean-up makes one: after `loaded`, the heap holds at most twice the sleepers
 * at its last clean-up (at most the peak) plus 64. An entry another condition holds for now (a pass found it due, an invocation, an abort mark: the caller's
 * `held`) is passed over and kept.
 */
export class SleepQueue {
  /** The heap, as two parallel arrays (no object an entry): ordered by until, then id. */
  readonly #untils: number[] = [];
  readonly #ids: number[] = [];
  readonly #current: (id: number, until: number) => boolean;
  /** Entries at the last clean-up (or at `loaded`): the next one when the heap has doubled since. None before `loaded`. */
  #cleaned = Number.POSITIVE_INFINITY;

  /** `current(id, until)`: whether task `id` still sleeps until `until`. */
  constructor(current: (id: number, until: number) => boolean) {
    this.#current = current;
  }

  /** How many entries the heap holds (current, stale and repeated ones). */
  get entries(): number {
    return this.#ids.length;
  }

  /**
   * Task `id` was committed asleep until `until`. A sleeper committed again with the same `until` (an abort mark, say)
   * is pushed again: its entries are equal, and each answer below counts it once.
   */
  push(until: number, id: number): void {
    const untils = this.#untils;
    const ids = this.#ids;
    let at = ids.length;
    untils.push(until);
    ids.push(id);
    // Sift up. A reload's sleepers come in id order and mostly slept in that order: one comparison each.
    while (at > 0) {
      const parent = (at - 1) >> 1;
      const up = untils[parent]!;
      if (up < until || (up === until && ids[parent]! <= id)) break;
      untils[at] = up;
      ids[at] = ids[parent]!;
      at = parent;
    }
    untils[at] = until;
    ids[at] = id;
    if (ids.length > 2 * this.#cleaned + 64) this.#clean();
  }

  /** The earliest current `until` whose sleeper `held` does not hold, or undefined. Keeps every current entry. */
  earliest(held: (id: number, until: number) => boolean): number | undefined {
    const keptUntils: number[] = [];
    const keptIds: number[] = [];
    let earliest: number | undefined;
    while (this.#ids.length > 0) {
      const until = this.#untils[0]!;
      const id = this.#ids[0]!;
      if (!this.#current(id, until)) {
        this.#pop();
        continue;
      }
      if (!held(id, until)) {
        earliest = until;
        break;
      }
      this.#pop();
      // Equal entries come off one after the other: keep one.
      if (keptIds.length > 0 && keptIds[keptIds.length - 1] === id && keptUntils[keptUntils.length - 1] === until) continue;
      keptUntils.push(until);
      keptIds.push(id);
    }
    for (let at = 0; at < keptIds.length; at++) this.push(keptUntils[at]!, keptIds[at]!);
    return earliest;
  }

  /** The ids of the current entries due at `now` (`until <= now`), earliest first, each once. Keeps them. */
  due(now: number): number[] {
    const untils: number[] = [];
    const ids: number[] = [];
    while (this.#ids.length > 0 && this.#untils[0]! <= now) {
      const until = this.#untils[0]!;
      const id = this.#ids[0]!;
      this.#pop();
      if (!this.#current(id, until)) continue;
      if (ids.length > 0 && ids[ids.length - 1] === id && untils[untils.length - 1] === until) continue;
      untils.push(until);
      ids.push(id);
    }
    for (let at = 0; at < ids.length; at++) this.push(untils[at]!, ids[at]!);
    return ids;
  }

  /**
   * The entries so far are each a sleeper's one current entry (an open's mirror, indexed once): the heap is clean,
   * and the next clean-up is when it has doubled from here — not during the open's indexing, where it would only walk
   * what is known current.
   */
  loaded(): void {
    this.#cleaned = this.#ids.length;
  }

  /** Removes the top entry. */
  #pop(): void {
    const until = this.#untils.pop()!;
    const id = this.#ids.pop()!;
    if (this.#ids.length > 0) this.#down(0, until, id);
  }

  /** Puts entry `(until, id)` at `at` or below it, moving the smaller child up while it comes first. */
  #down(from: number, until: number, id: number): void {
    const untils = this.#untils;
    const ids = this.#ids;
    const length = ids.length;
    let at = from;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= length) break;
      const right = child + 1;
      if (right < length && (untils[right]! < untils[child]! || (untils[right] === untils[child] && ids[right]! < ids[child]!)))
        child = right;
      const down = untils[child]!;
      if (until < down || (until === down && id <= ids[child]!)) break;
      untils[at] = down;
      ids[at] = ids[child]!;
      at = child;
    }
    untils[at] = until;
    ids[at] = id;
  }

  /** Keeps one current entry a sleeper (a current one's repeats are equal to it), heaped again (linear). */
  #clean(): void {
    const untils = this.#untils;
    const ids = this.#ids;
    const seen = new Set<number>();
    let kept = 0;
    for (let at = 0; at < ids.length; at++) {
      const id = ids[at]!;
      if (seen.has(id) || !this.#current(id, untils[at]!)) continue;
      seen.add(id);
      untils[kept] = untils[at]!;
      ids[kept] = ids[at]!;
      kept += 1;
    }
    untils.length = kept;
    ids.length = kept;
    for (let at = (kept >> 1) - 1; at >= 0; at--) this.#down(at, untils[at]!, ids[at]!);
    this.#cleaned = kept;
  }
}
