import { expect, type Page, test } from "@playwright/test";

// The README's React example (src/readme/, the README's blocks byte for byte), as a user pastes it.
const url = () => new URL("readme.html", process.env.REACT_CHAT_URL!).href;
const byRole = (page: Page, role: "user" | "assistant") => page.locator(`p[data-role="${role}"]`);

/** Uncaught errors and unhandled rejections of the page, and the console's errors (the browser's favicon request aside). */
function pageErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error" && !message.location().url.endsWith("/favicon.ico")) errors.push(message.text());
  });
  return errors;
}

test("the README's React example runs as pasted: a conversation is found, answered, and the same after a reload, with no page error", async ({
  page,
}) => {
  const errors = pageErrors(page);
  await page.goto(url());
  await page.getByRole("button", { name: "Send" }).click();
  await expect(byRole(page, "assistant")).toContainText("Answer to message");
  await expect(byRole(page, "user")).toHaveText("user: hello");

  await page.reload();
  await expect(byRole(page, "assistant")).toHaveCount(1);
  await expect(byRole(page, "assistant")).toContainText("Answer to message");
  await expect(byRole(page, "user")).toHaveCount(1);
  await page.getByRole("button", { name: "Send" }).click();
  await expect(byRole(page, "assistant")).toHaveCount(2);
  await expect(page.getByRole("alert")).toHaveCount(0);
  expect(errors).toEqual([]);
});
