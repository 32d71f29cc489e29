/**
 * A manual frame pace for the live view tests: frames coalesce when the clock moves less than `frameMs` between
 * updates; the test moves the clock (`advanceTo`) and the timers due by then fire, in the order they were set.
 */
export function manualPace() {
  const timers: Array<{ at: number; callback: () => void }> = [];
  const pace = {
    frameMs: 16,
    time: 0,
    now: () => pace.time,
    setTimer: (ms: number, callback: () => void) => void timers.push({ at: pace.time + ms, callback }),
    /** Moves the clock to `time`, firing the timers due by then. */
    advanceTo(time: number) {
      pace.time = time;
      for (const timer of timers.filter((candidate) => candidate.at <= time)) {
        timers.splice(timers.indexOf(timer), 1);
        timer.callback();
      }
    },
    /** The timers not fired yet. */
    timers,
  };
  return pace;
}
