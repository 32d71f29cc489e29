/** True for a value `await` would wait on (a promise, or any object with a `then` method). */
export function isThenable(value: unknown): boolean {
  return typeof value === "object" && value !== null && typeof (value as { then?: unknown }).then === "function";
}
