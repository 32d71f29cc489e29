/**
 * Every error the library throws on purpose is one of these classes. `name` is stable (match on it, not on
 * the message); the message says what happened and what to do next.
 */
export class DurableError extends Error {
  // Spelled out in every class: a production build minifies class names, and callers match on `name`.
  override name: string = "DurableError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}
