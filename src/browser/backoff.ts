/**
 * A retry's wait (the socket's reconnects, the page's resend on `NotReady`): `firstMs`·2^`step`, at most `maxMs`, drawn
 * from its upper half so that many pages that lost the same place do not come back at once.
 */
export function jitteredBackoff(step: number, firstMs: number, maxMs: number, random: () => number): number {
  const ceiling = Math.min(maxMs, firstMs * 2 ** step);
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}
