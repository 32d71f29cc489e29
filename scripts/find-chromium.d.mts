/** The path of a runnable Chromium ($CHROMIUM_PATH, the Playwright cache, /usr/bin/chromium), or undefined. */
export function findChromium(): string | undefined;
export declare const CHROMIUM_ARGS: string[];
