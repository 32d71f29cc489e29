import { LeaseNotHeld } from "../src/errors.ts";
import type { LeaseArbiter } from "../src/follow/arbiter.ts";

/** An arbiter that answers "the object holds it" until `grant()`, then grants epoch 2 for 60 s and renews it. */
export function heldUntilGranted(): { arbiter: LeaseArbiter; grant(): void } {
  let granted = false;
  return {
    arbiter: {
      acquire: async (place) => {
        if (!granted) throw new LeaseNotHeld(place, "the object holds it");
        return { epoch: 2, ttlMs: 60_000 };
      },
      renew: async () => ({ epoch: 2, ttlMs: 60_000 }),
      release: async () => {},
    },
    grant: () => {
      granted = true;
    },
  };
}
