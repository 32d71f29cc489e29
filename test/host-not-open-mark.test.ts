/**
 * The review of decision 0142, L2: only the host's own "not open" while it waits for the lock names a database the
 * page follows (`hostWaitingFor`, src/host/error-wire.ts). An app's error — any name, message and fields, a field
 * `waitingFor` or `hostWaitingFor` too — carries no such mark, here or across the wire (before: any string field
 * `waitingFor` was taken for it).
 */
import fc from "fast-check";
import { expect, it } from "vitest";
import { DurableError } from "../src/errors.ts";
import { deserializeError, hostWaitingFor, serializeError } from "../src/host/error-wire.ts";
import { notOpen } from "../src/host/status-parts.ts";

/** Across the wire as comlink's handler and the tabs' frames send it: JSON. */
const across = (error: unknown) => deserializeError(JSON.parse(JSON.stringify(serializeError(error))));

it("review 0142 L2: the host's own 'not open' while waiting for the lock is marked with the database, here and across the wire; its other 'not open' is not", () => {
  const error = notOpen({ kind: "waiting-for-lock", database: "db-1" });
  expect(hostWaitingFor(error)).toBe("db-1");
  expect(hostWaitingFor(across(error))).toBe("db-1");
  expect(across(error)).toBeInstanceOf(DurableError);
  expect((across(error) as { waitingFor?: unknown }).waitingFor).toBe("db-1"); // the readable field is kept
  expect(hostWaitingFor(notOpen({ kind: "starting" }))).toBeUndefined();
});

it("review 0142 L2 (property, hostile errors): an error an app throws, whatever its name, message and fields, is never marked as the host's 'not open' (a guard of the mark; the field check before it took { waitingFor: 'slot-7' }, test/follower-refused-review-0142's L2 case fails before)", () => {
  fc.assert(
    fc.property(
      fc.constantFrom("Error", "DurableError", "TypeError", "NotAuthorized", "x"),
      fc.oneof(fc.string(), fc.constant("The database is not open (status: waiting-for-lock).")),
      fc.dictionary(fc.oneof(fc.constantFrom("waitingFor", "hostWaitingFor", "database"), fc.string()), fc.jsonValue()),
      fc.boolean(),
      (name, message, fields, durable) => {
        const error = Object.assign(durable ? new DurableError(message) : new Error(message), fields);
        error.name = name;
        expect(hostWaitingFor(error)).toBeUndefined();
        expect(hostWaitingFor(across(error))).toBeUndefined();
        // A forged frame's details name it as a field only, never the mark.
        expect(hostWaitingFor(deserializeError({ name, message, details: { ...fields, waitingFor: "db" } as never }))).toBeUndefined();
      },
    ),
  );
  expect(hostWaitingFor(Object.assign(new Error("The slot is taken"), { waitingFor: "slot-7" }))).toBeUndefined();
});
