import type { Snapshot } from "../src/storage/records.ts";

/** A snapshot of a copy at `position` over 1 MB (three parts), its rows' ids below its nextId. */
export const copyAt = (position: number): Snapshot => ({
  batch: {
    fence: { epoch: 1, position },
    nextId: 10,
    tasks: [],
    conversations: [],
    entries: [],
    submissions: [],
    documents: [{ scope: "app", key: "big", value: `${position}`.repeat(1_500_000) }] as never,
  },
  epochs: [{ epoch: 1, start: 1 }],
});
