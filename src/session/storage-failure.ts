import { InvalidInput } from "../errors.ts";

const storageFailures = new WeakSet<object>();

export function markStorageFailure(error: unknown): unknown {
  // A row larger than storage holds (`InvalidInput`, limit maxRowBytes) is the commit's own refusal, as a
  // value past settings.limits is: the same commit would be refused again, so it is not retried.
  if (typeof error === "object" && error !== null && !(error instanceof InvalidInput)) storageFailures.add(error);
  return error;
}

/** True for an error that storage threw while applying a commit (full quota, I/O error): nothing was written. */
export function isStorageFailure(error: unknown): boolean {
  return typeof error === "object" && error !== null && storageFailures.has(error);
}
