import type { CrashPoint, CrashScenario, CrashSweepOptions, CrashSweepResult } from "./sweep/types.ts";
import { backendOf, runWorld } from "./sweep/world.ts";

export {
  BUILT_IN_INVARIANTS,
  type BuiltInInvariant,
  type CrashPoint,
  type CrashScenario,
  type CrashSweepOptions,
  type CrashSweepResult,
  type CrashWorldView,
  type SweepBackend,
  type SweepWorld,
} from "./sweep/types.ts";

/**
 * crashSweep: every commit boundary of a scenario is a crash point. The scenario runs once to count its
 * commits; then, for every commit k, a fresh world runs it again and crashes at that boundary — the storage
 * image is copied at that instant, the old harness is abandoned (its storage never answers again, its clock
 * never moves), a new harness opens on a copy of the image — and runs to the end; the invariants are checked
 * on what is left. Each boundary is crashed on both sides: right after commit k is stored (nothing after it
 * ran) and right before commit k+1 would be stored (everything up to it ran: the effects in between happened,
 * their commit did not). With `double`, the reopened process crashes again at one of its own boundaries (a
 * crash during recovery) before a third one finishes. Framework-free: it throws a `CrashSweepViolation` for the first
 * world that breaks an invariant, with the crash points and the commit log; otherwise it returns counts.
 *
 * Runs `scenario` once per crash point (see `CrashScenario`). Resolves with counts; throws `CrashSweepViolation`.
 * The parts: ./sweep/types.ts (the scenario and its views), ./sweep/world.ts (one crash world),
 * ./sweep/crashing-storage.ts (the storage that stops at a commit), ./sweep/invariants.ts (the built-in checks).
 */
export async function crashSweep<W>(scenario: CrashScenario<W>, options: CrashSweepOptions = {}): Promise<CrashSweepResult> {
  const backend = await backendOf(options.storage ?? "memory");
  const baseline = await runWorld(scenario, backend, options, []);
  if (baseline.violation) throw baseline.violation;
  const commits = baseline.commitsPerProcess[0]!;
  let single = 0;
  const pairs: CrashPoint[][] = [];
  let points = crashPoints(commits);
  if (options.single && points.length > options.single.sample) points = sample(points, options.single.sample, options.single.seed ?? 1);
  for (const point of points) {
    const result = await runWorld(scenario, backend, options, [point]);
    single++;
    if (result.violation) throw result.violation;
    if (options.double) for (const second of crashPoints(result.commitsPerProcess[1] ?? 0)) pairs.push([point, second]);
  }
  let chosen = pairs;
  if (typeof options.double === "object" && pairs.length > options.double.sample) {
    chosen = sample(pairs, options.double.sample, options.double.seed ?? 1);
  }
  for (const pair of chosen) {
    const result = await runWorld(scenario, backend, options, pair);
    if (result.violation) throw result.violation;
  }
  return { commits, worlds: single + chosen.length, single, double: chosen.length };
}

/** Both sides of every boundary of a run with `commits` commits. */
function crashPoints(commits: number): CrashPoint[] {
  const points: CrashPoint[] = [];
  for (let commit = 1; commit <= commits; commit++) {
    if (commit > 1) points.push({ commit, edge: "before" });
    points.push({ commit, edge: "after" });
  }
  return points;
}

/** `count` items of `list` drawn without replacement by a seeded generator (mulberry32), in list order. */
export function sample<T>(list: readonly T[], count: number, seed: number): T[] {
  let state = seed >>> 0;
  const random = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const indexes = list.map((_, index) => index);
  for (let i = 0; i < count; i++) {
    const j = i + Math.floor(random() * (indexes.length - i));
    [indexes[i], indexes[j]] = [indexes[j]!, indexes[i]!];
  }
  return indexes
    .slice(0, count)
    .sort((a, b) => a - b)
    .map((index) => list[index]!);
}
