/** Small helpers shared by the benchmarks: repeated runs summarized as median, min and max. */
export interface Summary {
  median: number;
  min: number;
  max: number;
  runs: number[];
}

export function summarize(runs: number[]): Summary {
  const sorted = [...runs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]!, runs };
}

export function fmt(value: number, digits = 1): string {
  return value.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

/** Prints a Markdown table (the README takes it as is). */
export function table(headers: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(headers), line(headers.map(() => "---")), ...rows.map(line)].join("\n");
}
