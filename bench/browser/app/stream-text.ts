/** The streamed answer of the streaming bench: the same faux stream in the worker and in the baseline page. */
export const STREAM_MODEL = { provider: "bench-faux", id: "bench-faux-1" };
/** One faux token (4 characters) per chunk at 60 tokens a second: 60 chunks a second, like a fast model. */
export const STREAM_TOKENS_PER_SECOND = 60;
export const STREAM_TOKEN_SIZE = { min: 1, max: 1 };
export const STREAM_TEXT = Array.from(
  { length: 12 },
  (_, index) => `Sentence ${index + 1} of the answer streams in token by token while the harness saves it once a second.`,
).join(" ");
