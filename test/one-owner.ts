import type { Ownership } from "../src/host/ownership.ts";

/** One lock over the tabs of a test (the first holds it; `requestTakeover` lets a waiting tab go first). */
export class OneOwner {
  holder: { name: string; letGo(): void } | undefined;
  readonly queue: { name: string; grant(): void; cancel(): void }[] = [];
  ownership(name: string): Ownership {
    let onTakeover = () => {};
    let waitingNow: { name: string; grant(): void; cancel(): void } | undefined;
    return {
      acquire: (waiting) =>
        new Promise((resolve) => {
          const release = () => {
            if (this.holder?.name !== name) return;
            this.holder = undefined;
            this.queue.shift()?.grant();
          };
          const grant = () => {
            waitingNow = undefined;
            this.holder = { name, letGo: () => onTakeover() };
            resolve(release);
          };
          if (!this.holder) return grant();
          waiting();
          waitingNow = { name, grant, cancel: () => resolve(undefined) };
          this.queue.push(waitingNow);
        }),
      cancel: () => {},
      requestTakeover: () => {
        const entry = waitingNow;
        if (!entry || !this.holder) return;
        this.queue.splice(this.queue.indexOf(entry), 1);
        this.queue.unshift(entry);
        this.holder.letGo();
      },
      onTakeoverRequest: (handler) => void (onTakeover = handler),
      lifeLock: async () => undefined,
    };
  }
}
