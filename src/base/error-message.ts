/** A thrown value as a message. Never throws itself: a cyclic object or a BigInt still gives a message (B2). */
export function errorMessage(error: unknown): string {
  try {
    if (error instanceof Error) return String(error.message);
    if (typeof error === "string") return error;
    if (typeof error === "bigint") return `${error}n`;
    return JSON.stringify(error) ?? String(error);
  } catch {
    try {
      return String(error);
    } catch {
      return "A value that cannot be shown as text was thrown.";
    }
  }
}
