import { InvalidPath } from "../errors.ts";

/**
 * A root-relative path in canonical form (`a/b.txt`): no leading `/`, no `.` segments, no `..` that leaves
 * the root. Every environment goes through this, so two spellings of one file are one file.
 */
export function normalizePath(path: string): string {
  if (typeof path !== "string") throw new InvalidPath(`A path must be a string; got ${typeof path}.`);
  const segments: string[] = [];
  for (const segment of path.replaceAll("\\", "/").split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === "..") {
      if (segments.length === 0) throw new InvalidPath(`Path ${JSON.stringify(path)} leaves the environment's root.`);
      segments.pop();
      continue;
    }
    segments.push(segment);
  }
  return segments.join("/");
}
